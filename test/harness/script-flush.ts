/**
 * A Redis that refuses writes and has no script loaded: what a `SCRIPT FLUSH` on a full
 * Redis (`maxmemory` under `noeviction`) leaves, for the tests of how every script call
 * gets through NOSCRIPT (src/redis/scripts.ts `resendOnNoScript`).
 */
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';

/** The words of a 503 caused by Redis's OOM refusal (src/redis/state-replies.ts). */
export const FULL = 'Redis refuses writes: it is out of memory (maxmemory); retry later';

/**
 * Fills Redis as far as writes go (`maxmemory 1`, `noeviction`) and drops every loaded
 * script, through `admin`; the returned function makes Redis take writes again.
 */
export async function fullAfterFlush(admin: Redis): Promise<() => Promise<void>> {
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', '1');
  await admin.script('FLUSH');
  return async () => {
    await admin.config('SET', 'maxmemory', '0');
  };
}

/** The message of each rejection among `settled`, asserting every one was rejected. */
export function refusals(settled: PromiseSettledResult<unknown>[]): string[] {
  return settled.map((s) => {
    assert.equal(s.status, 'rejected', 'refused while Redis is full');
    return s.reason instanceof Error ? s.reason.message : String(s.reason);
  });
}
