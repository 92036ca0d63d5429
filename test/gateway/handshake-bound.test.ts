/**
 * The node's bound on WebSocket handshakes in progress (`PIXIU_MAX_HANDSHAKES`;
 * src/gateway/handshake-slots.ts): past it a handshake is refused 503 UNAVAILABLE with
 * `Retry-After` at once, counted as `busy`; a handshake gives its slot back once its
 * `welcome` is out or it is refused (slowclient F1: a 5,000-device reconnect herd held
 * the node's event loop and Redis connection until its own store lease lapsed) — at
 * the refusal's answer, not at its connection's close: a client keeping its connection
 * alive after a refusal holds no slot.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { setImmediate as tick } from 'node:timers/promises';
import type { ConfigOverrides } from '../../src/config/config.js';
import { metricSample, within } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { Refused, type TestClient } from '../harness/ws-client.js';
import { expectRefused, startGateway, type GatewayFixture } from './gateway-fixture.js';

/** A node of the test's own on a redis-server of its own. */
async function ownNode(t: TestContext, overrides: ConfigOverrides): Promise<{ node: GatewayFixture; redis: RedisServer }> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  return { node: await startGateway(t, { redisUrl: redis.url, ...overrides }), redis };
}

/** Resolves once the node's HTTP server has taken `count` more upgrade requests, and their onRequest hooks have run. */
async function upgradesTaken(node: GatewayFixture, count: number): Promise<void> {
  let left = count;
  await new Promise<void>((resolve) => {
    const seen = (): void => {
      if (--left > 0) return;
      node.service.app.server.off('upgrade', seen);
      resolve();
    };
    node.service.app.server.on('upgrade', seen);
  });
  // The hooks run within the listener's tick and its microtasks.
  await tick();
  await tick();
}

test('past PIXIU_MAX_HANDSHAKES in progress a handshake is refused 503 busy with Retry-After at once; the slots come back with the welcomes', async (t) => {
  // Handshakes held in progress by a frozen Redis (their presence write waits), bounded well past the test's waits.
  const { node, redis } = await ownNode(t, { maxHandshakes: '3', redisCommandTimeoutMs: '20000' });
  const taken = upgradesTaken(node, 3);
  redis.pause();
  let thawed = false;
  t.after(() => { if (!thawed) redis.resume(); });
  const held = ['a', 'b', 'c'].map((user) => node.connect(user, { params: { last_seq: 0 } }));
  await within(10_000, 'the node taking the three upgrade requests', taken);
  const started = performance.now();
  const message = await expectRefused(node.connect('d', { params: { last_seq: 0 } }), 503, 'UNAVAILABLE',
    /^this node is busy with other WebSocket handshakes \(3 in progress: PIXIU_MAX_HANDSHAKES\); retry after its Retry-After$/);
  // Answered without waiting for Redis (frozen for 20 s of command timeout).
  assert.ok(performance.now() - started < 10_000, `refused after ${Math.round(performance.now() - started)} ms: ${message}`);
  let refusal: Refused | undefined;
  try {
    (await node.connect('e')).ws.terminate();
  } catch (err) {
    if (err instanceof Refused) refusal = err;
  }
  assert.equal(refusal?.status, 503);
  assert.equal(refusal.headers.get('retry-after'), '1');
  // Redis answers: the three are welcomed, and their slots are free again.
  redis.resume();
  thawed = true;
  const clients: TestClient[] = await Promise.all(held);
  for (const client of clients) assert.equal((await client.next()).t, 'welcome');
  const { client } = await node.connectWelcomed('f');
  await client.close();
  const metrics = await node.client.get('/metrics');
  assert.equal(metricSample(metrics.text, 'pixiu_ws_handshakes_total{outcome="busy"}'), 2);
  assert.equal(metricSample(metrics.text, 'pixiu_ws_handshakes_total{outcome="UNAVAILABLE"}'), 0, 'a busy refusal is not counted as Redis\'s 503');
});

test('a refused handshake and a welcomed one each give their slot back: one at a time, a node bound to 1 takes them all', async (t) => {
  const { node } = await ownNode(t, { maxHandshakes: '1' });
  for (let i = 0; i < 5; i++) await expectRefused(node.connect('u', { token: 'not-a-jwt' }), 401, 'UNAUTHORIZED');
  // Open ones, one after another: each holds its slot only until its welcome.
  const open: TestClient[] = [];
  for (const user of ['v', 'w', 'x']) open.push((await node.connectWelcomed(user)).client);
  for (const client of open) await client.close();
});

test('a refusal gives its slot back with its answer: a client keeping the connection alive after it holds no slot', async (t) => {
  const { node } = await ownNode(t, { maxHandshakes: '1' });
  // A plain GET of /v1/connect with a bad token, on a connection the client keeps open.
  const { host } = new URL(node.url);
  const socket = net.connect(Number(new URL(node.url).port), '127.0.0.1');
  t.after(() => socket.destroy());
  let answer = '';
  // Bounded, and failed at once by a close or error before the head: a node that never
  // answers fails here, naming what was awaited, not at the file's timeout.
  const answered = new Promise<void>((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      if (answer.includes('\r\n\r\n')) resolve();
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`the connection closed before the answer's head; got ${JSON.stringify(answer)}`)));
  });
  socket.write(`GET /v1/connect?device=phone HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer not-a-jwt\r\n\r\n`);
  await within(10_000, 'the head of the answer to a raw GET /v1/connect with a bad token', answered);
  assert.match(answer, /^HTTP\/1\.1 401 /);
  assert.equal(socket.destroyed, false, 'the connection is kept alive');
  await node.connectWelcomed('v');
});
