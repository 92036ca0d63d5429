/**
 * `pixiu redis lost-writes` lets its Redis go whatever happened (src/cli/redis-to-write.ts
 * `withRedisToWrite`), and a close that fails after the command's work failed does not
 * hide why the command failed (review35 5: a `finally` awaiting the close threw the
 * close's error instead — a replica's refusal, a prefix no service used, never seen).
 * No Redis: a stand-in target whose close the test makes fail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { StartupError } from '../../src/errors.js';
import { withRedisToWrite, type RedisToWrite } from '../../src/cli/redis-to-write.js';

/** A target whose close fails with `closeError` (none: it succeeds); counts its closes. */
function target(closeError?: Error): RedisToWrite & { closes: number } {
  const t = {
    redis: {} as Redis, where: 'the embedded Redis of /d', started: true, next: 'Now start the node.', closes: 0,
    close: async (): Promise<void> => {
      t.closes += 1;
      if (closeError !== undefined) throw closeError;
    },
  };
  return t;
}

test('the work\'s failure is thrown even when the close fails too; the close\'s failure is told, not lost', async () => {
  const to = target(new Error('redis-server did not stop'));
  const told: unknown[] = [];
  const refused = new StartupError('this Redis is a replica (role slave)');
  await assert.rejects(withRedisToWrite(to, async () => { throw refused; }, (err) => told.push(err)), (err: unknown) => err === refused);
  assert.equal(to.closes, 1);
  assert.deepEqual(told.map((e) => (e as Error).message), ['redis-server did not stop']);
});

test('after the work succeeded, a failed close is the command\'s failure (its AOF may not be written); a good one answers the work\'s result', async () => {
  const told: unknown[] = [];
  await assert.rejects(withRedisToWrite(target(new Error('redis-server did not stop')), async () => 'raised', (err) => told.push(err)), /did not stop/);
  assert.deepEqual(told, [], 'thrown, not only told');
  const fine = target();
  assert.equal(await withRedisToWrite(fine, async () => 'raised'), 'raised');
  assert.equal(fine.closes, 1);
});
