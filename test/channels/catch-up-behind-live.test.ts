/**
 * A `sub` with `since` whose history catch-up is held back by the client (paused by
 * backpressure) while live publications arrive and the history's cap trims past
 * them (src/streams/follower.ts): the live ones must still all arrive, in order, after
 * the history — they were published after the subscription. Before the fix the
 * catch-up's next page jumped over them and they were dropped as "already sent" (a
 * fresh review: p1 – p3 of p1 – p5 lost, every run).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import { Redis } from 'ioredis';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';
import { waitUntil } from '../harness/checks.js';
import { JWT_KEY, serverSockets, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { publish, subscribe, waitTopics } from './channel-fixture.js';

const KiB = 1024;
const HIGH_WATER = 64 * KiB;
const cleanup = cleanupList();
let gw: GatewayFixture;
let probe: Redis;
/** The server side of each connection, by device: to see what it has queued. */
let sockets: Map<string, Duplex>;

before(async () => {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  gw = await startGateway(cleanup, {
    redisUrl: redis.url, storeDurability: 'relaxed', channelHistory: '3',
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(1024 * 1024 * KiB), pausedTimeoutMs: '60s',
    maxMessageBytes: String(2 * 1024 * KiB),
  });
  probe = new Redis(redis.url);
  cleanup.after(() => probe.quit());
  sockets = serverSockets(gw);
});

after(() => cleanup.run());

test('live publications that arrive while a paused catch-up waits, and that the history trims, all arrive after the history, in order', { timeout: 60_000 }, async () => {
  const token = await testToken(JWT_KEY, 'viewer', { channels: ['c.*'] });
  const client = await gw.connect('viewer', { token, device: 'd1', params: { from: 'latest' } });
  assert.equal((await client.next()).t, 'welcome');
  await subscribe(client, probe, 'px:', 'c.fill');
  for (const h of ['h1', 'h2', 'h3']) await publish(gw.client, 'c.x', h);

  // The client stops reading; live publications on another channel fill its socket
  // past the high-water mark: the connection is paused.
  client.ws.pause();
  const sock = sockets.get('d1');
  assert.ok(sock);
  const big = 'y'.repeat(1024 * KiB);
  for (let fills = 0; sock.writableLength <= HIGH_WATER; fills++) {
    assert.ok(fills < 200, 'never paused');
    await publish(gw.client, 'c.fill', big);
  }
  // A catch-up of c.x from the start: h1 goes out, then it waits for the pause to end.
  const queued = sock.writableLength;
  client.send({ t: 'sub', channel: 'c.x', since: '0-0' });
  await waitTopics(probe, 'px:', { 'c.x': true });
  await waitUntil('the catch-up writes h1', async () => sock.writableLength > queued, 10_000, 5);
  // Live now, and queued behind the catch-up; the history (cap 3) keeps p3..p5.
  for (let i = 1; i <= 5; i++) await publish(gw.client, 'c.x', `p${i}`);

  client.ws.resume();
  const marker = await publish(gw.client, 'c.x', 'marker');
  const got: string[] = [];
  for (;;) {
    const f = await client.next(20_000);
    if (f.t !== 'pub' || f.channel !== 'c.x') continue;
    got.push(f.data as string);
    if (f.id === marker) break;
  }
  assert.deepEqual(got, ['h1', 'h2', 'h3', 'p1', 'p2', 'p3', 'p4', 'p5', 'marker']);
});
