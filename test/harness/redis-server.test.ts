/**
 * The harness's private redis-server (redis-server.ts): a port taken between the free
 * port's choice and redis-server's bind is given up for another, not a failed test
 * file ("Address already in use" in a clean-clone CI run, gateway/token-form).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { freePort, RedisServer } from './redis-server.js';

test('RedisServer.start takes another free port when the first one it chose is taken before redis-server binds it', async (t) => {
  const holder = net.createServer();
  holder.listen(0, '127.0.0.1');
  await once(holder, 'listening');
  t.after(() => holder.close());
  const taken = (holder.address() as net.AddressInfo).port;
  const ports = [taken];
  const server = await RedisServer.start({}, async () => ports.shift() ?? freePort());
  t.after(() => server.destroy());
  assert.notEqual(server.port, taken);
  const client = new Redis(server.url);
  t.after(() => client.disconnect());
  assert.equal(await client.ping(), 'PONG');
});
