/**
 * What a failed start of the embedded redis-server is said to fail of
 * (src/redis/server-log.ts): Redis's warning-level lines less its banner and host
 * advice, not its whole start-up log. The logs are redis-server 7.0's own.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { whyRedisFailed } from '../../src/redis/server-log.js';

/** A redis-server 7.0 start on an AOF with a corrupt incr file. */
const CORRUPT_AOF = `21954:C 05 Dec 2026 00:23:06.845 # oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo
21954:C 05 Dec 2026 00:23:06.845 # Redis version=7.0.15, bits=64, commit=00000000, modified=0, pid=21954, just started
21954:C 05 Dec 2026 00:23:06.845 # Configuration loaded
21954:M 05 Dec 2026 00:23:06.845 * monotonic clock: POSIX clock_gettime
21954:M 05 Dec 2026 00:23:06.846 * Running mode=standalone, port=0.
21954:M 05 Dec 2026 00:23:06.846 # Server initialized
21954:M 05 Dec 2026 00:23:06.846 # WARNING Memory overcommit must be enabled! Without it, a background save or replication may fail under low memory condition.
21954:M 05 Dec 2026 00:23:06.846 * Reading RDB base file on AOF loading...
21954:M 05 Dec 2026 00:23:06.846 * Done loading RDB, keys loaded: 0, keys expired: 0.
21954:M 05 Dec 2026 00:23:06.846 * DB loaded from base file appendonly.aof.1.base.rdb: 0.000 seconds
21954:M 05 Dec 2026 00:23:06.846 # Bad file format reading the append only file appendonly.aof.1.incr.aof: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>
`;

test('a failed start is told by the lines that say why: the banner, version and host advice are left out', () => {
  assert.equal(whyRedisFailed(CORRUPT_AOF),
    'Bad file format reading the append only file appendonly.aof.1.incr.aof: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>');
});

test('lines not in Redis\'s log format (a config error) are kept as they are', () => {
  const log = `
*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***
Reading the configuration file, at line 2
>>> 'appendonly "maybe"'
argument must be 'yes' or 'no'
`;
  assert.equal(whyRedisFailed(log), `*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***
Reading the configuration file, at line 2
>>> 'appendonly "maybe"'
argument must be 'yes' or 'no'`);
});

test('a log with nothing at warning level but its routine lines gives its last lines (a server killed while it loaded)', () => {
  const log = CORRUPT_AOF.split('\n').slice(0, 10).join('\n');
  assert.equal(whyRedisFailed(log).split('\n').length, 3);
  assert.match(whyRedisFailed(log), /DB loaded from base file/);
});
