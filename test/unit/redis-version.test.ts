/**
 * The start refuses a Redis older than 7.0 (src/redis/version-check.ts), read from
 * `INFO server` — Ubuntu 22.04's redis-server is 6.0, on which `SET … NX GET` and
 * `PEXPIRETIME` fail only when first used. The Redis 7 the tests run is accepted by
 * every service test; here, the texts of other versions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redisModeProblem, redisVersionProblem } from '../../src/redis/version-check.js';

/** `INFO server` as Redis writes it (CRLF line ends), with `version`. */
const info = (version: string): string => `# Server\r\nredis_version:${version}\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\n`;

test('a Redis older than 7.0 is refused, naming the version needed and the one found', () => {
  for (const version of ['6.0.16', '6.2.14', '5.0.7', '2.8.24']) {
    assert.equal(redisVersionProblem(info(version)), `Pixiu needs Redis 7.0 or later (it uses SET … NX GET and PEXPIRETIME); this one is ${version}`, version);
  }
});

test('Redis 7.0 and later are accepted, and a text without redis_version is not second-guessed', () => {
  for (const version of ['7.0.0', '7.0.15', '7.2.4', '7.4.1', '8.0.2', '10.1.0']) assert.equal(redisVersionProblem(info(version)), undefined, version);
  assert.equal(redisVersionProblem('# Server\r\nredis_mode:standalone\r\n'), undefined);
});

test('a Redis in cluster mode is refused, saying Cluster is not supported and what to run instead; other modes are not', () => {
  const cluster = '# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\nos:Linux\r\n';
  const problem = redisModeProblem(cluster) ?? '';
  assert.match(problem, /^this Redis runs in cluster mode \(redis_mode:cluster\), which Pixiu does not support: /);
  assert.match(problem, /one Redis primary holding every key/);
  assert.match(problem, /point PIXIU_REDIS_URL at a standalone Redis \(cluster-enabled no\)/);
  for (const mode of ['standalone', 'sentinel']) assert.equal(redisModeProblem(info('7.0.15').replace('standalone', mode)), undefined, mode);
  assert.equal(redisModeProblem('# Server\r\nredis_version:7.0.15\r\n'), undefined);
});
