/**
 * Redis came back with older data (an AOF restored from a copy, a failover to a
 * replica that was behind: DESIGN.md §4 `conns`, the chaos tester's F1). Its presence
 * may hold entries of connections of this node that have closed since. Such an entry
 * is stale: when the node writes a live connection of the same device back (its
 * heartbeat), the live one is kept — no 4002 "replaced by a newer connection", there
 * was none — and the stale one dropped; a read (GET /v1/users/{uid}/presence) neither
 * lists nor counts it. Older data is simulated by DUMP of the user's presence hash
 * before the connection closed, and RESTORE of it after. Real Redis, the real service.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

/** A service with the default heartbeat (25 s): nothing writes presence back during a test. */
let slow: GatewayFixture;
/** A service (its own key prefix) with a 1 s heartbeat: presence is written back within a second. */
let fast: GatewayFixture;
let probe: Redis;

fileRedis(async ({ redis, cleanup }) => {
  slow = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  fast = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisPrefix: 'fast:', heartbeatMs: '1s' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** The connection ids `fixture` lists for `user` (GET /v1/users/{uid}/presence). */
async function listedConns(fixture: GatewayFixture, user: string): Promise<string[]> {
  const answer = await fixture.client.get(`/v1/users/${user}/presence`);
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { connections: Array<{ conn: string }> }).connections.map((c) => c.conn);
}

test('after Redis comes back older, holding a closed connection of this node, the live connection of that device stays open (no 4002) and is the one listed', async () => {
  const conns = new Keys('fast:').conns('older');
  const { client: x1, welcome: w1 } = await fast.connectWelcomed('older', { device: 'tab' });
  const snapshot = await probe.dumpBuffer(conns);
  assert.ok(snapshot !== null, 'the presence hash holding X1');
  await x1.close();
  await waitUntil('X1 is no longer listed', async () => (await listedConns(fast, 'older')).length === 0);
  const { client: x2, welcome: w2 } = await fast.connectWelcomed('older', { device: 'tab' });
  const x2Conn = w2.conn as string;
  let closed: { code: number; reason: string } | undefined;
  void x2.closed.then((c) => { closed = c; });

  // Redis "comes back older": the hash as it was, X1's entry and not X2's. X2's next
  // heartbeat (1 s) writes its entry back.
  await probe.restore(conns, 0, snapshot, 'REPLACE');
  await waitUntil('X2 written back, or closed', async () => closed !== undefined || (await probe.hexists(conns, x2Conn)) === 1, 8000);
  assert.equal(closed, undefined, `X2 was closed: ${JSON.stringify(closed)}`);
  assert.deepEqual(Object.keys(await probe.hgetall(conns)), [x2Conn], `X1 (${String(w1.conn)}) dropped from Redis`);
  assert.deepEqual(await listedConns(fast, 'older'), [x2Conn], 'X2 listed, not the closed X1');
  // Two heartbeats later (each pings the socket and refreshes the entry): still open, still the only one.
  for (let i = 0; i < 2; i++) await once(x2.ws, 'ping', { signal: AbortSignal.timeout(5000) });
  assert.equal(closed, undefined, `X2 was closed: ${JSON.stringify(closed)}`);
  assert.deepEqual(await listedConns(fast, 'older'), [x2Conn]);
});

test('after Redis comes back older, a connection of this node closed since is neither listed nor left in Redis, while the live ones are listed', async () => {
  // Nothing writes presence back meanwhile (25 s heartbeat): what drops the stale entry is the read.
  const conns = new Keys('px:').conns('older-list');
  const { welcome: watch } = await slow.connectWelcomed('older-list', { device: 'watch' });
  const { client: laptop } = await slow.connectWelcomed('older-list', { device: 'laptop' });
  const snapshot = await probe.dumpBuffer(conns);
  assert.ok(snapshot !== null, 'the presence hash holding both');
  await laptop.close();
  await waitUntil('the laptop is no longer listed', async () => (await listedConns(slow, 'older-list')).length === 1);
  await probe.restore(conns, 0, snapshot, 'REPLACE');
  assert.equal(await probe.hlen(conns), 2, 'the closed laptop\'s entry is back in Redis');
  assert.deepEqual(await listedConns(slow, 'older-list'), [watch.conn], 'only the live watch is listed');
  assert.deepEqual(Object.keys(await probe.hgetall(conns)), [watch.conn], 'the stale entry is pruned');
});

test('after Redis comes back older, closed connections of this node do not count against the connection limit', async () => {
  const user = 'older-full';
  const conns = new Keys('px:').conns(user);
  const first: TestClient[] = [];
  for (const device of ['d1', 'd2', 'd3', 'd4', 'd5']) first.push((await slow.connectWelcomed(user, { device })).client);
  const snapshot = await probe.dumpBuffer(conns);
  assert.ok(snapshot !== null, 'the presence hash holding five');
  for (const c of first.slice(1)) await c.close();
  await waitUntil('four closed', async () => (await listedConns(slow, user)).length === 1);
  await probe.restore(conns, 0, snapshot, 'REPLACE');
  // At the limit (5) in Redis, four of them stale: four new devices get in.
  for (const device of ['e2', 'e3', 'e4', 'e5']) await slow.connectWelcomed(user, { device });
  assert.equal((await listedConns(slow, user)).length, 5);
});
