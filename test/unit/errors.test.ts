import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis, ReplyError } from 'ioredis';
import { MaxRetriesPerRequestError } from 'ioredis/built/errors/index.js';
import { ERRORS, PixiuError, outageFields } from '../../src/errors.js';
import { toRedisError } from '../../src/redis/client.js';
import { plainReason } from '../../src/redis/plain-reasons.js';

test('the catalogue: each code is its key, with an HTTP error status (DESIGN.md §7)', () => {
  const expected: Record<string, number> = {
    INVALID_REQUEST: 400, UNAUTHORIZED: 401, FORBIDDEN: 403, NOT_FOUND: 404,
    REQUEST_TIMEOUT: 408, CONFLICT: 409, PAYLOAD_TOO_LARGE: 413, UNSUPPORTED_MEDIA_TYPE: 415, EXPECTATION_FAILED: 417, HEADERS_TOO_LARGE: 431,
    RATE_LIMITED: 429, NOT_IMPLEMENTED: 501, UNAVAILABLE: 503, INTERNAL: 500,
  };
  assert.deepEqual(Object.fromEntries(Object.entries(ERRORS).map(([k, v]) => [k, v.status])), expected);
  for (const [key, spec] of Object.entries(ERRORS)) {
    assert.equal(spec.code, key);
    if ('closeCode' in spec) assert.ok(spec.closeCode === 1008 || spec.closeCode === 1009 || spec.closeCode === 1011 || (spec.closeCode >= 4000 && spec.closeCode < 5000));
  }
});

test('a PixiuError carries its catalogue entry and renders the JSON error body', () => {
  const err = new PixiuError('PAYLOAD_TOO_LARGE', 'message is 70000 bytes, the limit is 65536', { cause: new Error('x') });
  assert.ok(err instanceof Error);
  assert.equal(err.status, 413);
  assert.equal(err.closeCode, 1009);
  assert.deepEqual(err.toBody(), { error: { code: 'PAYLOAD_TOO_LARGE', message: 'message is 70000 bytes, the limit is 65536' } });
});

test('Redis failures map to UNAVAILABLE; script replies keep their catalogue code', () => {
  const timedOut = toRedisError(new Error('Command timed out'));
  assert.equal(timedOut.code, 'UNAVAILABLE');
  // A timeout may be this node too busy to read the answer, not Redis down: the message says both.
  assert.match(timedOut.message, /did not answer within the command timeout \(Redis down or hung, or this node too busy/);
  assert.equal(toRedisError(new Error('Connection is closed.')).message, 'Redis is unavailable, retry later');
  // Redis's state replies are named in plain words (src/redis/state-replies.ts), also
  // from a script's call and from a MULTI Redis refused; other replies are not quoted.
  assert.equal(toRedisError(new ReplyError("OOM command not allowed when used memory > 'maxmemory'. script: 91fb, on @user_script:1.")).message,
    'Redis refuses writes: it is out of memory (maxmemory); retry later');
  assert.equal(toRedisError(new ReplyError("READONLY You can't write against a read only replica.")).message,
    'Redis refuses writes: it is a read-only replica (a failover?); retry later');
  assert.match(toRedisError(new ReplyError('LOADING Redis is loading the dataset in memory')).message, /^Redis is still loading its data into memory .*; retry later$/);
  // MISCONF's two causes, each in its own words (Redis 7's texts), from a script's call too.
  assert.equal(toRedisError(new ReplyError('MISCONF Errors writing to the AOF file: No space left on device script: 91fb, on @user_script:1.')).message,
    'Redis refuses writes: it cannot write its append-only file (AOF): No space left on device (its disk is full: free space on it; Redis tries the write again every second); retry later');
  assert.equal(toRedisError(new ReplyError('MISCONF Errors writing to the AOF file: Input/output error')).message,
    'Redis refuses writes: it cannot write its append-only file (AOF): Input/output error (check its disk; Redis tries the write again every second); retry later');
  assert.match(toRedisError(new ReplyError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.")).message,
    /^Redis refuses writes: its last RDB snapshot \(background save\) failed and stop-writes-on-bgsave-error is on \(.*\); retry later$/);
  assert.equal(toRedisError(new ReplyError('MISCONF some other disk trouble')).message, 'Redis refuses writes: it cannot persist to disk (some other disk trouble); retry later');
  const aborted = Object.assign(new ReplyError('EXECABORT Transaction discarded because of previous errors.'), { previousErrors: [new ReplyError("OOM command not allowed when used memory > 'maxmemory'.")] });
  assert.equal(toRedisError(aborted).message, 'Redis refuses writes: it is out of memory (maxmemory); retry later');
  const other = toRedisError(new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'));
  assert.deepEqual([other.code, other.message], ['UNAVAILABLE', 'Redis is unavailable, retry later']);
  assert.equal(toRedisError(new Error("Stream isn't writeable and enableOfflineQueue options is false")).code, 'UNAVAILABLE');
  const fromScript = toRedisError(new Error('INVALID_REQUEST seq must be a positive integer'));
  assert.equal(fromScript.code, 'INVALID_REQUEST');
  assert.equal(fromScript.message, 'seq must be a positive integer');
  assert.equal(toRedisError(new Error('ERR user_script:12: NOT_FOUND no such room')).code, 'NOT_FOUND');
  const own = new PixiuError('FORBIDDEN', 'no');
  assert.equal(toRedisError(own), own);
});

test('outage log fields give the Redis client\'s own failures in plain words, and keep other messages as they are', async () => {
  // The texts as ioredis makes them: a command on a client that is not connected (no
  // offline queue), and its max-retries error.
  const offline = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false });
  const refused = await offline.get('k').then(() => assert.fail('answered while not connected'), (err: unknown) => err);
  offline.disconnect();
  assert.deepEqual(outageFields(refused), { reason: 'Redis connection lost (reconnecting)' });
  const dropped = new MaxRetriesPerRequestError(1);
  assert.deepEqual(outageFields(dropped), { reason: 'Redis connection lost before it answered (reconnecting)' });
  // As the cause of the UNAVAILABLE a request logs.
  assert.deepEqual(outageFields(toRedisError(refused)), {
    reason: 'Redis is unavailable, retry later', cause: 'Redis connection lost (reconnecting)', code: 'UNAVAILABLE',
  });
  // Other messages stay as they are.
  const socket = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
  assert.deepEqual(outageFields(socket), { reason: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ECONNREFUSED' });
  assert.equal(plainReason('Command timed out'), 'Command timed out');
  // A server that is not Redis: its first byte quoted, a guess only for HTTP's "H".
  assert.equal(plainReason('Unknown RESP type 72 "H". Please report this.'), 'the server there does not speak the Redis protocol (it answered "H…": an HTTP server?)');
  assert.equal(plainReason('Unknown RESP type 83 "S". Please report this.'), 'the server there does not speak the Redis protocol (it answered "S…")');
  assert.equal(plainReason('Unknown RESP type 21 "\u0015". Please report this.'), 'the server there does not speak the Redis protocol (it answered "\\x15…")');
  assert.equal(plainReason('Stream isn\'t writeable and enableOfflineQueue options is false, or else'), 'Stream isn\'t writeable and enableOfflineQueue options is false, or else');
});
