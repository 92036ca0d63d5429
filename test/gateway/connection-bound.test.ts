/**
 * The node's bound on its WebSocket connections (`PIXIU_MAX_CONNECTIONS`;
 * src/gateway/connection-bound.ts): past it a handshake is refused 503 UNAVAILABLE with
 * `Retry-After`, before its token is read, counted as `full` and logged at warn; a
 * connection that closes frees its place; producers are served all the while (walk13
 * §4: with no such bound, devices took every file descriptor under `ulimit -n 256`, and
 * the kernel reset producers' new connections and `/healthz` with no status and no log).
 * What it counts is the upgrade guard's count of upgrade sockets, whatever their path.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import { metricSample, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { rawRequest } from '../harness/raw-http.js';
import { RedisServer } from '../harness/redis-server.js';
import { Refused, type TestClient } from '../harness/ws-client.js';
import { NODE_FULL_LINE } from '../../src/gateway/handshake-refusals.js';
import { expectRefused, startGateway, type GatewayFixture } from './gateway-fixture.js';

/** The refusal of a full node, as docs/protocol.md gives it ("Connecting", 503). */
const FULL = /^this node holds as many WebSocket connections as it takes \(3 open or opening: PIXIU_MAX_CONNECTIONS\); retry after its Retry-After$/;

/** The refusal of `attempt`, which must be refused. */
async function refusalOf(attempt: Promise<TestClient>): Promise<Refused> {
  try {
    (await attempt).ws.terminate();
  } catch (err) {
    if (err instanceof Refused) return err;
    throw err;
  }
  return assert.fail('connected; expected a refusal');
}

/** The node's side of each upgrade request, in the order they arrive. */
function upgradeSockets(node: GatewayFixture): Socket[] {
  const sockets: Socket[] = [];
  node.service.app.server.on('upgrade', (_req, socket: Socket) => sockets.push(socket));
  return sockets;
}

/** Resolves once the node's side of `socket` has closed. */
async function closed(socket: Socket | undefined): Promise<void> {
  assert.ok(socket);
  if (!socket.closed) await once(socket, 'close');
}

test('past PIXIU_MAX_CONNECTIONS a handshake is refused 503 full with Retry-After, logged; one that closes frees a place; producers are served meanwhile', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const { logger, lines } = capturingLogger();
  const node = await startGateway(t, { redisUrl: redis.url, maxConnections: '3' }, logger);
  const sockets = upgradeSockets(node);
  const held = [];
  for (const user of ['a', 'b', 'c']) held.push((await node.connectWelcomed(user)).client);

  await expectRefused(node.connect('d'), 503, 'UNAVAILABLE', FULL);
  // A refused handshake's socket holds a place until it has closed (the guard counts it):
  // each is let close before the next, whose refusal counts the others.
  await closed(sockets[3]);
  const refusal = await refusalOf(node.connect('e'));
  assert.equal(refusal.status, 503);
  assert.equal(refusal.headers.get('retry-after'), '1');
  await closed(sockets[4]);
  // Before the token is read: a bad one is refused as full too, not 401.
  await expectRefused(node.connect('f', { token: 'not-a-jwt' }), 503, 'UNAVAILABLE', FULL);
  // The refused sockets hold no place once closed.
  await Promise.all(sockets.slice(3).map(closed));

  // Producers and probes are served while the node is full, and delivery goes on.
  const [seq] = await node.post('a');
  assert.equal((await held[0]?.nextOf('msg'))?.seq, seq);
  assert.equal((await node.client.get('/healthz')).status, 200);
  assert.equal((await node.client.get('/readyz')).status, 200, 'a full node still serves producers: ready');

  const metrics = await node.client.get('/metrics');
  assert.equal(metricSample(metrics.text, 'pixiu_ws_handshakes_total{outcome="full"}'), 3);
  assert.equal(metricSample(metrics.text, 'pixiu_ws_handshakes_total{outcome="UNAVAILABLE"}'), 0, 'not counted as Redis\'s 503');
  assert.equal(metricSample(metrics.text, 'pixiu_ws_handshakes_total{outcome="UNAUTHORIZED"}'), 0);
  assert.equal(metricSample(metrics.text, 'pixiu_ws_connections'), 3);
  // The bound itself, to compare with (walk28 F3: it was only in the start's log line).
  assert.equal(metricSample(metrics.text, 'pixiu_ws_connections_max'), 3);
  assert.match(metrics.text, /^# TYPE pixiu_ws_connections_max gauge$/m);
  // One warn line for the three (thinned: one per 10 s).
  const warned = lines.filter((l) => l.msg === NODE_FULL_LINE);
  assert.equal(warned.length, 1);
  assert.deepEqual([warned[0]?.level, warned[0]?.open, warned[0]?.limit], [40, 3, 3]);

  // One closes: its place is taken by the next handshake, and the one after is refused again.
  await held[0]?.close();
  await closed(sockets[0]);
  held.push((await node.connectWelcomed('g')).client);
  await expectRefused(node.connect('h'), 503, 'UNAVAILABLE', FULL);
});

test('a plain GET of /v1/connect (no upgrade) is an HTTP request like a producer\'s: a full node answers it as usual', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const node = await startGateway(t, { redisUrl: redis.url, maxConnections: '1' });
  await node.connectWelcomed('a');
  await expectRefused(node.connect('b'), 503, 'UNAVAILABLE');
  // Checked past the bound: its token (401), not the node's connections (503).
  const answer = await node.client.get('/v1/connect?device=d', { headers: { authorization: 'Bearer not-a-jwt' } });
  assert.equal(answer.status, 401, answer.text);
});

test('an upgrade request to another path holds a place until its socket closes: a handshake past the bound meanwhile is refused full', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  // The other request's answer is held by a frozen Redis, bounded well past the test's waits.
  const node = await startGateway(t, { redisUrl: redis.url, maxConnections: '1', redisCommandTimeoutMs: '20000' });
  const sockets = upgradeSockets(node);
  redis.pause();
  let thawed = false;
  t.after(() => { if (!thawed) redis.resume(); });
  // `Upgrade: h2c` (as `curl --http2` sends on http://) on a producer route that reads Redis.
  const other = rawRequest(node.url, `GET /v1/users/u/presence HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${node.service.secrets.apiToken}\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n`);
  await waitUntil('the node takes the upgrade request', async () => sockets.length === 1, 5_000, 5);
  // Refused at once (a handshake let through would wait on the frozen Redis).
  await expectRefused(node.connect('a'), 503, 'UNAVAILABLE', /\(1 open or opening: PIXIU_MAX_CONNECTIONS\)/);
  redis.resume();
  thawed = true;
  const answer = await other;
  assert.deepEqual([answer.status, answer.closedByServer], [200, true], answer.text);
  // Both sockets closed, the place is free.
  await Promise.all(sockets.map(closed));
  await node.connectWelcomed('a');
});

test('pixiu_ws_connections_max is the bound in force: the default derived at start when PIXIU_MAX_CONNECTIONS is unset, as the start logs it', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const { logger, lines } = capturingLogger();
  const node = await startGateway(t, { redisUrl: redis.url }, logger);
  const logged = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('websocket connections bounded'));
  assert.equal(typeof logged?.maxConnections, 'number', JSON.stringify(logged));
  const metrics = await node.client.get('/metrics');
  assert.equal(metricSample(metrics.text, 'pixiu_ws_connections_max'), logged?.maxConnections);
  assert.ok((logged?.maxConnections as number) > 0);
});
