/**
 * Anything that can PUBLISH on the service's Redis (another app sharing it, an
 * operator) reaches ChannelHub. A message on a channel's topic whose id is no stream ID,
 * or whose payload is no JSON object, is ignored with a warning, and delivery goes on.
 * Before, an id that is no stream ID reached StreamFollower, whose id comparison threw
 * inside ioredis's `message` event: an uncaught exception, which ends `pixiu serve`.
 * Entries of a channel's history that are no publication are read past by a `since`
 * catch-up; a page of nothing else ended it there, skipping the publications after them.
 * A payload that is JSON but no publication's (`{}`: a reviewer's C4) is left out too,
 * live and from the history: it made a `pub` frame that was no JSON.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken, type TestClient } from '../harness/ws-client.js';
import { JWT_KEY, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { publish, subscribe } from './channel-fixture.js';

const cleanup = cleanupList();
let gw: GatewayFixture;
let probe: Redis;
before(async () => {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', channelHistory: '1000' });
  probe = new Redis(redis.url);
  cleanup.after(() => probe.quit());
});
after(() => cleanup.run());

/**
 * Connects `user` allowing `<prefix>.*`, welcomed, not following anything yet; publishes
 * `first` on `<prefix>.x` and finds that channel's history key.
 */
async function welcomedAfterFirst(user: string, prefix: string): Promise<{ c: TestClient; first: string; history: string }> {
  const token = await testToken(JWT_KEY, user, { channels: [`${prefix}.*`] });
  const c = await gw.connect(user, { token, params: { from: 'latest' } });
  assert.equal((await c.next()).t, 'welcome');
  const first = await publish(gw.client, `${prefix}.x`, 'first');
  const history = (await probe.keys(`px:ch:*${prefix}.x*:history`))[0];
  assert.ok(history, 'the channel has a history stream');
  return { c, first, history };
}

test('a malformed message on a channel topic is ignored: no uncaught exception, the followers keep receiving', { timeout: 30_000 }, async (t) => {
  const uncaught: Error[] = [];
  const onUncaught = (err: Error): void => { uncaught.push(err); };
  // Replaces node:test's own handler for the test's length, so the crash is seen here.
  const saved = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  process.on('uncaughtException', onUncaught);
  t.after(() => {
    process.removeListener('uncaughtException', onUncaught);
    for (const l of saved) process.on('uncaughtException', l);
  });
  const token = await testToken(JWT_KEY, 'u', { channels: ['c.*'] });
  const c = await gw.connect('u', { token, params: { from: 'latest' } });
  assert.equal((await c.next()).t, 'welcome');
  const h = await publish(gw.client, 'c.x', 'h');
  // After a since catch-up the follower compares the next live ids with the last sent.
  assert.equal(await subscribe(c, 'c.x', '0-0'), '0-0');
  assert.equal((await c.next()).id, h);
  // An id that is no stream ID; a payload that is no JSON object (its id newer than any: not dropped as already sent).
  for (const text of ['bogus|{"type":"t","ts":1,"data":1}', '1-0-0|{"type":"t","ts":1,"data":1}', '99999999999999-0|not json', '99999999999999-1|[1]']) {
    assert.equal(await probe.publish('px:ch:c.x', text), 1);
  }
  // Published on the same topic after them: the node handles it after them, in order.
  const next = await publish(gw.client, 'c.x', 'after');
  const f = await c.next(5000);
  assert.deepEqual({ uncaught: uncaught.map((e) => e.message), id: f.id }, { uncaught: [], id: next });
});

test('a since catch-up reads past a page of history entries that are no publication (another writer\'s) to the publications after them', { timeout: 30_000 }, async () => {
  const { c, first, history } = await welcomedAfterFirst('v', 'd');
  // More than one catch-up page (100) of entries without a publication's fields.
  for (let i = 0; i < 150; i++) await probe.xadd(history, '*', 'x', 'foreign');
  const second = await publish(gw.client, 'd.x', 'second');
  assert.equal(await subscribe(c, 'd.x', first), first);
  const f = await c.next(5000);
  assert.equal(f.id, second, JSON.stringify(f));
});

test('a foreign payload that is JSON but no publication ({}, extra fields, a bad ts) makes no pub frame, live or from the history', { timeout: 30_000 }, async () => {
  const { c, first, history } = await welcomedAfterFirst('w', 'e');
  // Each gave `{"t":"pub","channel":"e.x","id":"…",}` (not JSON) or a frame with fields of its own.
  const foreign = ['{}', '{garbage', '{"type":"t","ts":1,"data":1,"t":"welcome"}', '{"type":"t","ts":"1","data":1}', ' {"type":"t","ts":1,"data":1}'];
  for (const p of foreign) await probe.xadd(history, '*', 'p', p);
  const second = await publish(gw.client, 'e.x', 'second');
  // From the history: the catch-up sends the two publications only.
  assert.equal(await subscribe(c, 'e.x', first), first);
  const caughtUp = await c.next(5000);
  assert.deepEqual({ t: caughtUp.t, id: caughtUp.id }, { t: 'pub', id: second });
  // Live: ids newer than any, so none is dropped as already sent.
  for (const [i, p] of foreign.entries()) assert.equal(await probe.publish('px:ch:e.x', `99999999999999-${i}|${p}`), 1);
  const third = await publish(gw.client, 'e.x', 'third');
  const live = await c.next(5000);
  assert.deepEqual({ t: live.t, id: live.id }, { t: 'pub', id: third });
});
