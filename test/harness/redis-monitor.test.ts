/**
 * The harness's MONITOR reader (redis-monitor.ts): a monitored line's arguments with
 * Redis's escapes, and the commands a real redis-server runs, each once and in order.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { waitUntil } from './checks.js';
import { monitorArgs, monitorRedis, type MonitoredCommand } from './redis-monitor.js';
import { RedisServer } from './redis-server.js';

test('a MONITOR line gives its arguments with quotes, backslashes and \\xHH bytes unescaped', () => {
  assert.deepEqual(monitorArgs('1796640506.443293 [0 127.0.0.1:60680] "set" "a \\"b\\" \\\\c" "\\x00\\xff\\r\\n"'), ['set', 'a "b" \\c', '\x00\xff\r\n']);
  assert.deepEqual(monitorArgs('1796640506.443293 [0 lua] "time"'), ['time']);
  assert.equal(monitorArgs('OK'), undefined);
});

test('monitorRedis reports each command a redis-server runs after MONITOR, in order, binary arguments included', async (t) => {
  const server = await RedisServer.start();
  t.after(() => server.destroy());
  const seen: MonitoredCommand[] = [];
  await monitorRedis(server.url, t, (args) => seen.push(args));
  const client = new Redis(server.url);
  t.after(() => client.disconnect());
  await client.set('k "1"', Buffer.from([0, 0xff, 0x0a]));
  await client.get('k "1"');
  await waitUntil('MONITOR showed the GET', async () => seen.some((args) => args[0]?.toLowerCase() === 'get'), 5000, 5);
  const ours = seen.filter((args) => ['set', 'get'].includes(args[0]?.toLowerCase() ?? ''));
  assert.deepEqual(ours, [['set', 'k "1"', '\x00\xff\n'], ['get', 'k "1"']]);
});
