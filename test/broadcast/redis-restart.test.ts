/**
 * The node's broadcast reader across a Redis restart (DESIGN.md §8, §11): Redis is
 * stopped and started again while the reader is blocked in `XREAD`; broadcasts posted
 * after the restart reach a connected client without restarting the service, and no
 * broadcast reaches it twice (the reader resumes after the last entry it handed out).
 * With AOF the stream survives, so a client resuming from before the restart simply
 * catches up; without it the stream is lost, and such a client is told `reset` first.
 * And a node whose Redis is down shuts down all the same (its blocked read is left).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, type CleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { expectFrame, nextBcast, readerBlocked, type Posted } from './broadcast-fixture.js';

/**
 * Posts a broadcast, retrying while the service reports Redis unavailable (503) after
 * the restart; only a 201 published anything.
 */
async function postWhenBack(gw: GatewayFixture, data: unknown): Promise<Posted> {
  let posted: Posted | undefined;
  await waitUntil('POST /v1/broadcast answers 201 again', async () => {
    const answer = await gw.client.post('/v1/broadcast', { type: 'test.news', data });
    if (answer.status === 201) posted = answer.body as Posted;
    else assert.equal(answer.status, 503, answer.text);
    return posted !== undefined;
  }, 20_000, 100);
  return posted as Posted;
}

async function restartCase(t: CleanupList, aof: boolean): Promise<void> {
  const redis = await RedisServer.start({ aof });
  t.after(() => redis.destroy());
  const gw = await startGateway(t, { redisUrl: redis.url, storeDurability: 'relaxed' });
  const admin = (await openInbox(t, redis.url)).redis;
  const client = await gw.connect('restart');
  await expectFrame(client, 'welcome');
  const before = await postWhenBack(gw, { before: 1 });
  assert.equal((await nextBcast(client)).bseq, before.bseq);

  await readerBlocked(admin);
  await redis.stop();
  await redis.restart();

  const afterRestart = await postWhenBack(gw, { after: 1 });
  const f = await nextBcast(client, 20_000);
  assert.deepEqual([f.bseq, f.data], [afterRestart.bseq, { after: 1 }]);
  const marker = await postWhenBack(gw, { marker: 1 });
  // Exactly the marker next: nothing from before the restart came again.
  assert.equal((await nextBcast(client)).bseq, marker.bseq);

  // A client resuming from before the restart: with AOF the stream is whole; without
  // it the stream was recreated, which is a reset.
  const back = await gw.connect('resume', { params: { last_bseq: before.bseq } });
  await expectFrame(back, 'welcome');
  if (!aof) assert.deepEqual(await expectFrame(back, 'reset'), { t: 'reset', stream: 'broadcast', bseq: marker.bseq });
  assert.equal((await nextBcast(back)).bseq, afterRestart.bseq);
  assert.equal((await nextBcast(back)).bseq, marker.bseq);
}

/** Runs a case and then its clean-up, last step first: the service closes before its Redis goes. */
async function withCleanup(aof: boolean): Promise<void> {
  const cleanup = cleanupList();
  try {
    await restartCase(cleanup, aof);
  } finally {
    await cleanup.run();
  }
}

test('Redis restarted (AOF on) while the reader is blocked: later broadcasts arrive, none twice', { timeout: 60_000 }, () => withCleanup(true));

test('Redis restarted (AOF off: the stream is lost) while the reader is blocked: later broadcasts arrive, none twice', { timeout: 60_000 }, () => withCleanup(false));

test('the service shuts down while Redis is down and the reader is blocked', { timeout: 20_000 }, async () => {
  const cleanup = cleanupList();
  try {
    const redis = await RedisServer.start();
    cleanup.after(() => redis.destroy());
    const gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
    const admin = (await openInbox(cleanup, redis.url)).redis;
    const client = await gw.connect('shutdown');
    await expectFrame(client, 'welcome');
    await readerBlocked(admin);
    await redis.kill();
    // Before the fix the reader waited on its read, which ioredis keeps for a reconnect
    // that never comes: close() never resolved.
    await gw.service.close();
    assert.equal((await client.waitClose()).code, 1001);
  } finally {
    await cleanup.run();
  }
});
