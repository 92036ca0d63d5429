/**
 * What a `client_msg_id` claim or settle that got no reply from Redis leaves
 * (src/cluster/claim-leftovers.ts, src/cluster/client-id-claims.ts): a settle is made
 * again once Redis answers, and a claim's pending mark is dropped only while no later
 * attempt of the node holds it. The service-level case (a claim timed out on a frozen
 * Redis, the retry on another node stored at once) is in
 * test/service/redis-hung-shared.test.ts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { ClientIdClaims } from '../../src/cluster/client-id-claims.js';
import { isPixiuError, PixiuError } from '../../src/errors.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { whenConnected, waitUntil } from '../harness/checks.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const files = cleanupList();
const keys = new Keys('px:');
let server: RedisServer;
let redis: Redis;

before(async () => {
  server = await RedisServer.start();
  files.after(() => server.destroy());
  redis = await createRedis({ url: server.url, commandTimeoutMs: 10_000, name: 'pixiu:test' });
  files.after(() => redis.disconnect());
});

after(() => files.run());

/**
 * A client of its own with a short command timeout, as a node's. Its connect is tried up
 * to three times: on a loaded machine the 300 ms can pass before Redis answers the
 * client's first command (a clean-clone CI run beside a helper), which is not what these
 * tests are about.
 */
async function nodeClient(t: CleanupContext): Promise<Redis> {
  for (let attempt = 1; ; attempt++) {
    try {
      const client = await createRedis({ url: server.url, commandTimeoutMs: 300, name: 'pixiu:node' });
      t.after(() => client.disconnect());
      return client;
    } catch (err) {
      if (attempt === 3 || !isPixiuError(err, 'UNAVAILABLE')) throw err;
    }
  }
}

test('a settle that got no reply (the connection lost) is made again once Redis answers: the claim names the stored message', async (t) => {
  const client = await nodeClient(t);
  const claims = new ClientIdClaims(client, keys, 'settle-a');
  t.after(() => claims.stop());
  const key = keys.clientIdClaim('settle-lost-1');
  assert.deepEqual(await claims.claim('settle-lost-1'), { state: 'mine' });
  // The message is stored; the connection drops before the settle is sent (it is
  // refused at once, with the offline queue off, and so never runs).
  client.disconnect(true);
  await assert.rejects(claims.settle('settle-lost-1', '00aa00aa00aa00aa', Date.now() + 60_000),
    (err: unknown) => err instanceof PixiuError && err.code === 'UNAVAILABLE');
  claims.end('settle-lost-1');
  assert.equal(await redis.get(key), 'P|settle-a', 'the pending mark is left');
  await whenConnected(client);
  // Tried again at 1 s (the first try, at once, found the connection still down).
  await waitUntil('the claim names the message', async () => (await redis.get(key)) === '00aa00aa00aa00aa', 5000);
});

test('a claim that timed out is dropped once Redis answers, but not while a later attempt of the node holds it', async (t) => {
  const client = await nodeClient(t);
  const claims = new ClientIdClaims(client, keys, 'later-a');
  t.after(() => claims.stop());
  const key = keys.clientIdClaim('later-1');
  // Writes wait (a Redis hung for them): the claim times out and runs when they resume.
  await redis.call('CLIENT', 'PAUSE', '1000', 'WRITE');
  await assert.rejects(claims.claim('later-1'), (err: unknown) => err instanceof PixiuError && err.code === 'UNAVAILABLE');
  // A retry to the same node begins before the first attempt is over.
  const second = claims.claim('later-1');
  claims.end('later-1');
  await redis.call('CLIENT', 'UNPAUSE');
  assert.deepEqual(await second, { state: 'mine' }, 'the retry finds its node\'s own mark');
  // The tries at once and at 1 s are made while the retry is under way: both skipped, its mark stays.
  await waitUntil('the tries at once and at 1 s were skipped', () => Promise.resolve(claims.leftoverTriesSkipped >= 2), 5000);
  assert.equal(await redis.get(key), 'P|later-a', 'the mark the retry holds is kept');
  // The retry ends without storing (nor releasing): the next try drops the stale mark.
  claims.end('later-1');
  await waitUntil('the stale mark is dropped', async () => (await redis.get(key)) === null, 5000);
});

test('a claim that timed out never drops another store\'s claim, nor a settled one', async (t) => {
  const client = await nodeClient(t);
  const claims = new ClientIdClaims(client, keys, 'other-a');
  t.after(() => claims.stop());
  for (const [cid, value] of [['other-1', 'P|other-b'], ['other-2', '0123456789abcdef']] as const) {
    await redis.call('CLIENT', 'PAUSE', '1000', 'WRITE');
    await assert.rejects(claims.claim(cid));
    claims.end(cid);
    // Before A's claim runs, another store's claim (or a message) takes the key.
    await redis.call('CLIENT', 'UNPAUSE');
    await redis.set(keys.clientIdClaim(cid), value);
  }
  // A's tries are over: each found another store's claim or a message, and left it.
  await waitUntil('the node has no leftover claim to clear', () => Promise.resolve(claims.leftovers === 0), 5000);
  assert.equal(await redis.get(keys.clientIdClaim('other-1')), 'P|other-b');
  assert.equal(await redis.get(keys.clientIdClaim('other-2')), '0123456789abcdef');
});
