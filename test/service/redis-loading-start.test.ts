/**
 * A start on a Redis still loading its data (walk29 F10; src/redis/loading-wait.ts):
 * ioredis's ready check waits it out, and the start says so in one info line with the
 * progress Redis gives, where the wait was silent. The load made slow and observable by
 * Redis's own test settings: `key-load-delay` (µs per key) and
 * `loading-process-events-interval-bytes` (answering clients every KiB of it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess } from '../harness/pixiu-server.js';
import { capturingLogger } from '../harness/log-capture.js';
import { waitUntil } from '../harness/checks.js';

/** Resolves once `port` on 127.0.0.1 takes a TCP connection (Redis listens before it loads). */
async function listening(port: number): Promise<void> {
  await waitUntil(`127.0.0.1:${port} takes a connection`, () => new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => { socket.destroy(); resolve(true); });
    socket.on('error', () => resolve(false));
  }), 10_000, 20);
}

test('a start on a Redis loading its data logs one line saying it waits, with the progress', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start({ args: ['--key-load-delay', '100', '--loading-process-events-interval-bytes', '1024'] });
  t.after(() => redis.destroy());
  const admin = new Redis(redis.url);
  await admin.eval("for i = 1, 20000 do redis.call('SET', 'load:' .. i, i) end return 1", 0);
  await admin.call('SAVE');
  await admin.quit();
  await redis.stop();
  // 20,000 keys at 100 µs each: about 2 s of loading.
  const loaded = redis.restart();
  await listening(redis.port);
  const { logger, lines } = capturingLogger();
  const { client } = await startInProcess(t, { redisUrl: redis.url, logLevel: 'info' }, logger);
  await loaded;
  const waits = lines.filter((l) => l.msg?.startsWith('Redis is loading its data') === true);
  assert.equal(waits.length, 1, JSON.stringify(lines.map((l) => l.msg)));
  assert.match(waits[0]?.msg ?? '', /^Redis is loading its data \(its AOF or RDB file, [\d.]+ % done(, about \d+ s left)?\): the start waits until it has$/);
  assert.equal(typeof waits[0]?.['loadedPerc'], 'number');
  assert.equal(waits[0]?.['redis'], 'pixiu');
  assert.equal((await client.get('/readyz')).status, 200);
});
