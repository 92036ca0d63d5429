/**
 * A disconnect (DELETE /v1/users/{uid}/connections) while the node holding the
 * connection has its bus subscriber away (DESIGN.md §9): the kick published then
 * reaches no one. That node is still registered — alive, its subscriber reconnecting —
 * so the kick is sent again, naming the connection, until it is received: once the
 * subscriber is back, the connection is closed 1008 as asked, rather than left open
 * (and written back to presence at its next refresh). The subscriber is kept away by
 * refusing its SUBSCRIBE (ACL), publishing still allowed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

let a: GatewayFixture;
let b: GatewayFixture;
let probe: Redis;

fileRedis(async ({ redis, cleanup }) => {
  a = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  b = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** CLIENT LIST lines of the nodes' bus subscribers. */
async function subscribers(): Promise<string[]> {
  return (await probe.client('LIST') as string).split('\n').filter((l) => /\bname=pixiu:bus:/.test(l));
}

test('a kick B\'s subscriber missed while away is sent again and closes the connection once it is back', async (t) => {
  t.after(() => probe.acl('SETUSER', 'default', '+subscribe', '+psubscribe', '+ssubscribe'));
  const { client } = await b.connectWelcomed('kicked', { device: 'phone' });

  // Both subscribers are cut off and their re-subscribes refused (publishing still works).
  await probe.acl('LOG', 'RESET');
  await probe.acl('SETUSER', 'default', '-subscribe', '-psubscribe', '-ssubscribe');
  for (const line of await subscribers()) await probe.client('KILL', 'ID', /\bid=(\d+)/.exec(line)?.[1] ?? '0');
  await waitUntil('the re-subscribes are refused', async () => (await probe.acl('LOG') as unknown[]).length > 0);

  const answer = await a.client.request('DELETE', '/v1/users/kicked/connections');
  assert.deepEqual(answer.body, { user: 'kicked', closed: 1 });

  await probe.acl('SETUSER', 'default', '+subscribe', '+psubscribe', '+ssubscribe');
  for (const line of await subscribers()) await probe.client('KILL', 'ID', /\bid=(\d+)/.exec(line)?.[1] ?? '0');
  const { code } = await client.waitClose(9000);
  assert.equal(code, 1008);
});
