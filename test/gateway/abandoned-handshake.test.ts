/**
 * A handshake its client has already given up on replaces nothing (DESIGN.md §6;
 * src/gateway/abandoned-handshakes.ts): an upgrade request with the client's FIN or RST
 * right behind it (a client's connect timeout fired while the request sat in a slow
 * uplink) leaves the device's live connection open and delivering, its presence entry
 * in place. Before, it closed the live connection 4002 and then went away itself (the
 * network-fault tester's F1). Raw TCP sockets play the client that leaves, so the FIN
 * or RST goes right behind the request; the live connection is a `ws` client.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { Redis } from 'ioredis';
import { metricSample, waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken, type TestClient } from '../harness/ws-client.js';
import { JWT_KEY, serverSockets, startGateway, type GatewayFixture } from './gateway-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
let sockets: Map<string, Duplex>;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  gw = await startGateway(cleanup, { redisUrl: redis.url });
  sockets = serverSockets(gw);
});

after(async () => {
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});

/** How the client leaves right behind its request: a FIN (`end`) or a RST. */
type Leave = 'fin' | 'rst';

/** Writes an upgrade request of `user`'s `device` on a raw socket; returns the socket, not yet left. */
async function rawRequest(user: string, device: string, query: string): Promise<net.Socket> {
  const { port } = new URL(gw.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  socket.on('data', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write([
    `GET /v1/connect?device=${device}${query} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Upgrade: websocket', 'Connection: Upgrade',
    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13',
    `Authorization: Bearer ${await testToken(JWT_KEY, user)}`, '', '',
  ].join('\r\n'));
  return socket;
}

function leave(socket: net.Socket, how: Leave): void {
  if (how === 'fin') socket.end();
  else socket.resetAndDestroy();
}

/** The server's end of the latest upgrade of `device` other than `not`, once it has one. */
async function serverSocketOf(device: string, not: Duplex | undefined): Promise<Duplex> {
  await waitUntil('the server has the upgrade request', async () => (sockets.get(device) ?? not) !== not, 5000, 5);
  return sockets.get(device) as Duplex;
}

async function abandonedCount(): Promise<number> {
  const text = (await gw.client.get('/metrics', { headers: { authorization: '' } })).text;
  return metricSample(text, 'pixiu_ws_handshakes_total{outcome="abandoned"}') ?? 0;
}

async function presenceOf(user: string): Promise<string[]> {
  const answer = await gw.client.get(`/v1/users/${user}/presence`);
  return (answer.body as { connections: Array<{ conn: string }> }).connections.map((c) => c.conn);
}

/** The live connection is open, listed alone in presence, and gets a message posted now. */
async function stillLive(user: string, live: TestClient, conn: string): Promise<void> {
  const [seq] = await gw.post(user);
  const [msg] = await live.msgs(1, { ack: true, timeoutMs: 5000 });
  assert.equal(msg?.seq, seq);
  assert.equal(live.ws.readyState, live.ws.OPEN, 'the live connection is still open');
  assert.deepEqual(await presenceOf(user), [conn], 'presence lists the live connection, and only it');
}

// The cursor is read before the presence write (no last_seq), or not (resuming with
// last_seq, as the docs' example client reconnects): the FIN or RST may be read while
// the handshake waits on Redis, or only once it has yielded to the event loop.
for (const how of ['fin', 'rst'] as const) {
  for (const [resume, query] of [['the cursor read', ''], ['last_seq', '&last_seq=0']] as const) {
    test(`an upgrade with the client's ${how.toUpperCase()} right behind it (${resume}) leaves the device's live connection open and delivering`, async () => {
      const user = `gone-${how}-${query === '' ? 'cursor' : 'seq'}`;
      const { client: live, welcome } = await gw.connectWelcomed(user, { device: 'phone' });
      const liveSocket = sockets.get('phone');
      const before = await abandonedCount();
      const raw = await rawRequest(user, 'phone', query);
      leave(raw, how);
      const serverSide = await serverSocketOf('phone', liveSocket);
      // The handshake is over once its socket is (dropped, or with the fix undone, refused by `ws`).
      await waitUntil('the server closed the abandoned upgrade', async () => serverSide.destroyed, 5000, 5);
      await stillLive(user, live, welcome.conn as string);
      assert.equal(await abandonedCount(), before + 1, 'counted as an abandoned handshake');
      raw.destroy();
      await live.close();
    });
  }
}

/** Whether a script call of the node waits on a CLIENT PAUSE WRITE (CLIENT LIST: flag `b`, command evalsha). */
async function scriptWaits(probe: Redis): Promise<boolean> {
  return /flags=\S*b\S* .*cmd=evalsha/.test(String(await probe.call('CLIENT', 'LIST')));
}

test('a client that leaves while its handshake writes presence: the live connection stays open, with its presence entry back', async (t) => {
  const probe = new Redis(redis.url);
  t.after(async () => {
    await probe.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    probe.disconnect();
  });
  for (const how of ['fin', 'rst'] as const) {
    const user = `gone-mid-write-${how}`;
    const { client: live, welcome } = await gw.connectWelcomed(user, { device: 'tablet' });
    const liveSocket = sockets.get('tablet');
    const before = await abandonedCount();
    // Writes to Redis wait (reads go on). With last_seq nothing is read before the
    // presence write: the handshake passes its first check (the client is still there)
    // and waits on the write; then the client leaves.
    await probe.call('CLIENT', 'PAUSE', '10000', 'WRITE');
    const raw = await rawRequest(user, 'tablet', '&last_seq=0');
    const serverSide = await serverSocketOf('tablet', liveSocket);
    await waitUntil('the presence write waits on the pause', () => scriptWaits(probe), 5000, 5);
    leave(raw, how);
    await waitUntil('the server saw the client leave', async () => serverSide.destroyed || !serverSide.readable, 5000, 5);
    await probe.call('CLIENT', 'UNPAUSE');
    await waitUntil('the server closed the abandoned upgrade', async () => serverSide.destroyed, 5000, 5);
    await stillLive(user, live, welcome.conn as string);
    assert.equal(await abandonedCount(), before + 1, 'counted as an abandoned handshake');
    raw.destroy();
    await live.close();
  }
});
