/** src/redis/url.ts: the Redis URL forms, their ioredis options, and how they are shown. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRedis } from '../../src/redis/client.js';
import { redactUrl, redisTarget, redisUrlProblem, unixUrl } from '../../src/redis/url.js';

test('redactUrl hides the password of the user part, a user part without ":", and ?password=', () => {
  const cases: Array<[string, string]> = [
    ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379'],
    ['redis://admin:pw@host:6379/0', 'redis://admin:***@host:6379/0'],
    ['redis://:pw@host', 'redis://:***@host'],
    ['rediss://lonepw@host', 'rediss://***@host'],
    ['redis://host/0?password=pw&family=6', 'redis://host/0?password=***&family=6'],
    ['redis://host/0?family=6&PASSWORD=pw', 'redis://host/0?family=6&PASSWORD=***'],
    ['unix://:pw@/tmp/r.sock?db=1', 'unix://:***@/tmp/r.sock?db=1'],
    ['unix:///tmp/a@b.sock', 'unix:///tmp/a@b.sock'],
    // The user part runs to the last @ before the path: a password's own @ is hidden with it.
    ['redis://:p@ss@host:6379', 'redis://:***@host:6379'],
    ['redis://ops:p@s@s@host/0', 'redis://ops:***@host/0'],
    // Every ?password=, and only up to a fragment.
    ['redis://host?password=one&family=6&password=two', 'redis://host?password=***&family=6&password=***'],
    ['redis://host?password=pw#frag', 'redis://host?password=***#frag'],
  ];
  for (const [url, shown] of cases) assert.equal(redactUrl(url), shown, url);
});

test('redisTarget reads unix:// URLs with credentials and options; redis:// URLs go to ioredis as they are', () => {
  assert.deepEqual(redisTarget('unix:///tmp/r.sock'), { path: '/tmp/r.sock' });
  assert.deepEqual(redisTarget('unix:///tmp/my%20redis.sock'), { path: '/tmp/my redis.sock' });
  assert.deepEqual(redisTarget('unix://:p%40ss@/tmp/r.sock?db=2'), { path: '/tmp/r.sock', username: '', password: 'p@ss', db: 2 });
  assert.deepEqual(redisTarget('unix://ops:pw@/tmp/r.sock?password=other'), { path: '/tmp/r.sock', username: 'ops', password: 'pw' });
  assert.equal(redisTarget('redis://:pw@127.0.0.1:6379/3'), 'redis://:pw@127.0.0.1:6379/3');
  // A user part without ":" is a user name alone, no password.
  assert.deepEqual(redisTarget('unix://ops@/tmp/r.sock'), { path: '/tmp/r.sock', username: 'ops' });
  // The socket path is the URL's, whatever a ?path= option says; the scheme is read in any case.
  assert.deepEqual(redisTarget('unix:///tmp/r.sock?path=/tmp/other.sock'), { path: '/tmp/r.sock' });
  assert.deepEqual(redisTarget('UNIX:///tmp/r.sock'), { path: '/tmp/r.sock' });
});

test('redisUrlProblem says what is wrong in words, never quoting the URL', () => {
  const cases: Array<[string, RegExp]> = [
    ['http://host:6379', /scheme must be redis:\/\/, rediss:\/\/ or unix:\/\//],
    ['redis://u:s3cr%zz@host', /password has a %/],
    ['redis://u%zz:s3cr@host', /user name has a %/],
    ['redis://u:s3cr@host:port/0', /not a URL that can be read/],
    ['redis://u:s3cr@host/db0', /database number/],
    // Digits first and then more: ioredis would read the leading number and ignore the rest.
    ['redis://u:s3cr@host/0abc', /database number/],
    ['redis://u:s3cr@host/1/2', /database number/],
    ['redis://u:s3cr@host/123456', /database number/],
    ['unix://u:s3cr@', /needs the socket path/],
    ['unix:///tmp/r.sock?db=x', /db must be a database number/],
    ['unix:///tmp/r.sock?db=x1', /db must be a database number/],
    ['redis:///0', /names no host/],
  ];
  for (const [url, expected] of cases) {
    const problem = redisUrlProblem(url);
    assert.ok(problem !== undefined, url);
    assert.match(problem, expected, url);
    assert.ok(!problem.includes('s3cr'), problem);
  }
  for (const ok of ['redis://127.0.0.1:6379', 'rediss://u:p@h:6380/15', 'redis://[::1]:6379', 'unix:///tmp/r.sock']) {
    assert.equal(redisUrlProblem(ok), undefined, ok);
  }
});

test('unixUrl encodes a socket path that redisTarget reads back whole, % ? # @ and spaces included', () => {
  for (const sock of ['/var/run/redis.sock', '/data/100% sure/redis.sock', '/d/a?b#c/u@h:p/redis.sock']) {
    assert.deepEqual(redisTarget(unixUrl(sock)), { path: sock }, sock);
  }
});

test('a unix:// password holding an @ written as is is read whole, as a redis:// one is, and no part of it reaches the error of a failed connect', async () => {
  // redis://:P@ssw0rd@host is read with the last @ ending the credentials (WHATWG URL);
  // the unix:// form says it takes the same credentials.
  assert.deepEqual(redisTarget('unix://:P@ssw0rd-tail@/tmp/r.sock'), { path: '/tmp/r.sock', username: '', password: 'P@ssw0rd-tail' });
  const failed = await createRedis({ url: 'unix://:P@ssw0rd-tail@/tmp/pixiu-no-such-dir/redis.sock', commandTimeoutMs: 1000 }).then(
    (client) => { client.disconnect(); return new Error('connected'); }, (err: unknown) => err as Error);
  assert.doesNotMatch(failed.message, /ssw0rd-tail/);
});

test('a unix:// password holding / ? # or @ written as is is read whole, shown as ***, and no part of it reaches a failed connect\'s error; credentials with no absolute socket path after them are refused and shown as unix://***', async () => {
  for (const password of ['ab/cdSECRET', 'ab#cdSECRET', 'ab?cdSECRET', 'a@b:c/dSECRET', 'x@/ySECRET']) {
    const url = `unix://:${password}@/tmp/pixiu-no-such-dir/redis.sock?db=1`;
    assert.deepEqual(redisTarget(url), { path: '/tmp/pixiu-no-such-dir/redis.sock', username: '', password, db: 1 }, url);
    assert.equal(redactUrl(url), 'unix://:***@/tmp/pixiu-no-such-dir/redis.sock?db=1', url);
    const failed = await createRedis({ url, commandTimeoutMs: 1000 }).then(
      (client) => { client.disconnect(); return new Error('connected'); }, (err: unknown) => err as Error);
    assert.doesNotMatch(failed.message, /SECRET/, failed.message);
  }
  assert.deepEqual(redisTarget('unix://ops:pw@/tmp/a@b.sock'), { path: '/tmp/a@b.sock', username: 'ops', password: 'pw' });
  assert.equal(redisUrlProblem('unix://:secret@tmp/relative.sock'), 'a unix:// URL needs the socket path, an absolute one, after the @ of its credentials, like unix://:password@/var/run/redis.sock');
  assert.equal(redactUrl('unix://:secret@tmp/relative.sock'), 'unix://***');
  assert.equal(redactUrl('unix:///tmp/r.sock?password=SECRET&db=2'), 'unix:///tmp/r.sock?password=***&db=2');
});
