/**
 * PendingRemovals (src/cluster/presence-removals.ts): removals that failed are tried
 * again on a timer until they succeed; one whose entry has expired meanwhile is dropped
 * without a call; a user's own retry takes only theirs; stop() forgets everything. The
 * removal function is the test's own: what reaches Redis is tested in
 * test/gateway/presence-outage.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PendingRemovals } from '../../src/cluster/presence-removals.js';

/** A removal function that fails while `down` is set, recording each call. */
function fakeRedis(): { down: boolean; calls: Array<[string, string[]]>; remove: (user: string, conns: readonly string[]) => Promise<void> } {
  const state = {
    down: true,
    calls: [] as Array<[string, string[]]>,
    remove: async (user: string, conns: readonly string[]) => {
      state.calls.push([user, [...conns]]);
      if (state.down) throw new Error('Redis is unavailable');
    },
  };
  return state;
}

/** Lets the promise chains a timer started run to their end (timers here are mocked; setImmediate is not). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('pending removals are retried on the timer until they succeed, then nothing more is sent', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const redis = fakeRedis();
  const pending = new PendingRemovals(redis.remove, 20);
  const until = Date.now() + 60_000;
  pending.add('ann', 'c1', until);
  pending.add('ann', 'c2', until);
  pending.add('bob', 'c3', until);
  assert.equal(pending.size, 3);
  t.mock.timers.tick(20);
  await settle();
  assert.equal(redis.calls.length, 2, 'one retry round: a call per user');
  assert.equal(pending.size, 3, 'failed retries keep them');
  redis.down = false;
  t.mock.timers.tick(20);
  await settle();
  assert.equal(pending.size, 0);
  const lastTwo = redis.calls.slice(-2).sort((x, y) => x[0].localeCompare(y[0]));
  assert.deepEqual(lastTwo, [['ann', ['c1', 'c2']], ['bob', ['c3']]], 'one call per user');
  t.mock.timers.tick(1000);
  await settle();
  assert.equal(redis.calls.length, 4, 'no retry once none is pending');
});

test('a removal whose entry has expired is dropped without a call', async () => {
  const redis = fakeRedis();
  const pending = new PendingRemovals(redis.remove, 60_000);
  pending.add('ann', 'old', Date.now() - 1);
  await pending.retryAll();
  assert.equal(pending.size, 0);
  assert.deepEqual(redis.calls, []);
  pending.stop();
});

test('retryUser takes only that user\'s removals; stop forgets the rest and retries nothing', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const redis = fakeRedis();
  redis.down = false;
  const pending = new PendingRemovals(redis.remove, 20);
  pending.add('ann', 'c1', Date.now() + 60_000);
  pending.add('bob', 'c2', Date.now() + 60_000);
  await pending.retryUser('ann');
  assert.deepEqual(redis.calls, [['ann', ['c1']]]);
  assert.equal(pending.size, 1);
  pending.stop();
  assert.equal(pending.size, 0);
  pending.add('cid', 'c3', Date.now() + 60_000);
  assert.equal(pending.size, 0, 'a removal failing during the shutdown is not kept either');
  t.mock.timers.tick(1000);
  await settle();
  assert.deepEqual(redis.calls, [['ann', ['c1']]], 'nothing after stop');
});

test('a retry round stops at the first batch of users that fails: while Redis fails, the rest are not sent to it too', async () => {
  const redis = fakeRedis();
  const pending = new PendingRemovals(redis.remove, 60_000);
  // One more user than a batch (64 users at once).
  for (let i = 0; i <= 64; i++) pending.add(`u${i}`, 'c', Date.now() + 60_000);
  await pending.retryAll();
  assert.equal(redis.calls.length, 64, 'the first batch only');
  assert.equal(pending.size, 65, 'all still pending');
  redis.down = false;
  await pending.retryAll();
  assert.equal(pending.size, 0);
  assert.equal(redis.calls.length, 64 + 65);
  pending.stop();
});
