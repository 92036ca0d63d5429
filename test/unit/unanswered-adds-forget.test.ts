/**
 * UnansweredAdds (src/cluster/presence-settle.ts) remembers each connection it handed
 * over for one entry lifetime, so that several settlings of one add hand it once. It
 * forgot those past their time only when a later settling was answered: after an
 * outage that settled many adds, their keys stayed until the node's next failed add,
 * which may never come (reread-presence F9). Now a timer forgets them while any is
 * remembered. A fake Redis answers the settling script with one replaced connection.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { UnansweredAdds } from '../../src/cluster/presence-settle.js';
import { Keys } from '../../src/redis/keys.js';
import { waitUntil } from '../harness/checks.js';

/** Short, so the test waits a fraction of a second past it. */
const TTL_MS = 100;

test('the connections handed over are forgotten one entry lifetime on, with no later settling', async (t) => {
  // The settling's reply: the one connection the add replaced (`<expiresAt>|<node>|<device>|<since>`).
  const redis = { evalsha: async () => ['old-conn', `${Date.now() + 60_000}|n2|phone|1`] } as unknown as Redis;
  const handed: string[] = [];
  const adds = new UnansweredAdds(redis, new Keys('forget:'), {
    ttlMs: TTL_MS, retryMs: 50, now: () => Date.now(),
    onReplaced: (_user, replaced) => handed.push(...replaced.map((r) => r.conn)),
  });
  t.after(() => adds.stop());
  adds.failed('u1', 'c1', Date.now());
  await waitUntil('the settling was answered', async () => handed.length === 1 && adds.size === 0, 2_000, 10);
  assert.equal(adds.handedRemembered, 1);
  await waitUntil('the hand-over is forgotten', async () => adds.handedRemembered === 0, 1_000, 10);
  assert.deepEqual(handed, ['old-conn'], 'handed over once');
});
