/**
 * A Redis password never reaches the log (docs: the Redis URL is logged with its
 * password removed, src/redis/url.ts redactUrl). A password with an `@` in it, written
 * as is in PIXIU_REDIS_URL (`redis://:P@ssw0rd-secret@host:port`), is accepted: the
 * URL is read with its last `@` ending the credentials, and the service connects. The
 * redaction must hide all of it, not only what comes before the first `@`.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service/service.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, tempDataDir } from '../harness/pixiu-server.js';
import { capturingLogger } from '../harness/log-capture.js';

const SECRET_TAIL = 'ssw0rd-never-logged';
const PASSWORD = `P@${SECRET_TAIL}`;
const files = cleanupList();

after(() => files.run());

test('a Redis password holding an @ is kept out of every log line, whole', async () => {
  const redis = await RedisServer.start({ args: ['--requirepass', PASSWORD] });
  files.after(() => redis.destroy());
  const url = `redis://:${PASSWORD}@127.0.0.1:${redis.port}`;
  const dataDir = await tempDataDir(files);
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir, redisUrl: url });
  const { logger, lines } = capturingLogger();
  const service = await startService(config, logger);
  files.after(() => service.close());
  // It did connect with that password: the service is ready.
  const ready = await fetch(new URL('/readyz', service.url));
  assert.equal(ready.status, 200, await ready.text());
  const listening = lines.find((l) => l.msg === 'pixiu listening');
  assert.ok(listening, 'the listening line is logged');
  const leaked = lines.filter((l) => JSON.stringify(l).includes(SECRET_TAIL));
  assert.deepEqual(leaked.map((l) => JSON.stringify(l)), [], 'log lines hold part of the Redis password');
});
