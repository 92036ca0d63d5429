/**
 * Redis's error replies about its own state, not about the command: full under
 * `maxmemory-policy noeviction` (`OOM command not allowed when used memory >
 * 'maxmemory'.`), a read-only replica after a failover (`READONLY`), still loading its
 * data (`LOADING`), held by a long script (`BUSY`) … The next call may succeed once the
 * state changes, so each is an outage (503 UNAVAILABLE, retried), and this is the one
 * place that words it: the 503 a request gets (src/redis/client.ts `toRedisError`) and
 * the one `/readyz` answers (src/api/routes/health.ts) say the same plain words, where a
 * producer used to read only "Redis is unavailable" (a chaos tester's finding, with
 * `maxmemory` set below the memory in use). Redis's own text stays in the log line's
 * `cause` (src/errors.ts `outageFields`).
 *
 * A script's call refused so keeps the code in front (Redis 7: `OOM command not allowed
 * … script: <sha>, on @user_script:1.`); a MULTI whose commands Redis refused ends in
 * `EXECABORT`, with the refusals in ioredis's `previousErrors` (built/transaction.js).
 *
 * `MISCONF` is two refusals with two causes and two fixes, told apart by Redis's text
 * (Redis 7 server.c `writeCommandsGetDiskErrorMessage`): a failed RDB snapshot under
 * `stop-writes-on-bgsave-error` (`MISCONF Redis is configured to save RDB snapshots, but
 * it's currently unable to persist to disk. …`), and a failed write or fsync of the
 * append-only file (`MISCONF Errors writing to the AOF file: No space left on device`,
 * the OS's words for the errno). Both used to be worded as the first, also on a Redis
 * that takes no snapshots at all and whose AOF was on a full disk (walk13 F2).
 */

import { cutText } from '../text-cut.js';

/** What a `MISCONF` reply means, in plain words, from its text (see above). */
function misconfWords(message: string): string {
  const line = message.split('\n')[0] ?? '';
  // Redis retries the AOF write every second (serverCron) and takes writes again once it succeeds.
  const aof = /^MISCONF Errors writing to the AOF file: (.*?)(?: script: .*)?$/.exec(line);
  if (aof !== null) {
    const cause = cutText((aof[1] ?? '').trim(), 100);
    const fix = /no space left/i.test(cause) ? 'its disk is full: free space on it' : 'check its disk';
    return `Redis refuses writes: it cannot write its append-only file (AOF): ${cause} (${fix}; Redis tries the write again every second)`;
  }
  if (/^MISCONF Redis is configured to save RDB snapshots\b/.test(line)) {
    return 'Redis refuses writes: its last RDB snapshot (background save) failed and stop-writes-on-bgsave-error is on '
      + '(Redis\'s log says why, a full disk?; it takes writes again once a BGSAVE succeeds)';
  }
  return `Redis refuses writes: it cannot persist to disk (${cutText(line.replace(/^MISCONF /, ''), 200)})`;
}

/** What Redis's refusal for being full means (`OOM`). */
const OUT_OF_MEMORY = 'Redis refuses writes: it is out of memory (maxmemory)';

/**
 * Each state reply's code (the reply's first word), and what it means, in plain words
 * (or how to word it from the reply's message).
 */
const STATE_REPLIES: Readonly<Record<string, string | ((message: string) => string)>> = {
  OOM: OUT_OF_MEMORY,
  READONLY: 'Redis refuses writes: it is a read-only replica (a failover?)',
  NOREPLICAS: 'Redis refuses writes: fewer replicas answer it than its min-replicas-to-write',
  MISCONF: misconfWords,
  MASTERDOWN: 'Redis refuses commands: it is a replica that lost its link to its primary',
  LOADING: 'Redis is still loading its data into memory (it just started)',
  BUSY: 'Redis is busy running a script past its time limit (busy-reply-threshold)',
  TRYAGAIN: 'Redis Cluster is moving the keys asked for',
  CLUSTERDOWN: 'Redis Cluster is down',
};

/** A reply's code: its first word, when it is one of {@link STATE_REPLIES}. */
const STATE_CODE = new RegExp(`^(${Object.keys(STATE_REPLIES).join('|')})\\b`);

/**
 * The state replies that pass by themselves (Redis loading, a script past its limit, a
 * replica without its primary, a slot moving): a command refused so may be sent again.
 */
export const PASSING_STATE_CODES = ['LOADING', 'BUSY', 'MASTERDOWN', 'TRYAGAIN'] as const satisfies readonly (keyof typeof STATE_REPLIES)[];

/**
 * The plain words for the state reply `err` is, or that a refused MULTI's
 * `previousErrors` hold, or that its `cause` is (the catalogue error a Redis call was
 * answered with: client.ts `toRedisError`) — e.g. `Redis refuses writes: it is out of
 * memory (maxmemory)`, `Redis refuses writes: it cannot write its append-only file (AOF):
 * No space left on device (…)`; undefined when it is none (another error reply, a timeout, a
 * closed connection).
 */
export function redisStateReason(err: unknown): string | undefined {
  const e = err as { message?: unknown; previousErrors?: unknown; cause?: { message?: unknown } | null } | null | undefined;
  const candidates = [e?.message, ...(Array.isArray(e?.previousErrors) ? e.previousErrors.map((p: { message?: unknown } | null) => p?.message) : []), e?.cause?.message];
  for (const message of candidates) {
    const code = typeof message === 'string' ? STATE_CODE.exec(message)?.[1] : undefined;
    const words = code !== undefined ? STATE_REPLIES[code] : undefined;
    if (words !== undefined) return typeof words === 'string' ? words : words(message as string);
  }
  return undefined;
}

/** True when `err` is, or was caused by, Redis refusing a write because it is full (`OOM`, {@link redisStateReason}). */
export function isOutOfMemory(err: unknown): boolean {
  return redisStateReason(err) === OUT_OF_MEMORY;
}
