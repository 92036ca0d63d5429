/**
 * Notifies across nodes while a node's bus subscriber is away (DESIGN.md §5, §9): a
 * notify published then reaches no one. The publishing node keeps the presence of a
 * node still registered, and the node whose subscriber comes back pulls every
 * connection within a second, so the message arrives without waiting for a heartbeat
 * (25 s here). The subscriber is kept away by refusing its channel (ACL), as a Redis
 * restart would for a moment. Two services in this process, one real Redis.
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

test('a message posted on A while B\'s subscriber is away reaches B\'s device within seconds of it coming back', async (t) => {
  t.after(() => probe.acl('SETUSER', 'default', 'allchannels'));
  const { client } = await b.connectWelcomed('roamer', { device: 'phone' });
  await a.post('roamer');
  assert.equal((await client.next()).seq, 1, 'delivered across nodes while all is well');

  // Both subscribers are cut off and their re-subscribes refused.
  await probe.acl('LOG', 'RESET');
  await probe.acl('SETUSER', 'default', 'resetchannels');
  await waitUntil('the re-subscribes are refused', async () => (await probe.acl('LOG') as unknown[]).length > 0);
  await a.post('roamer');
  await a.post('roamer');
  // A's notify reached no one; B is still registered, so its presence stays.
  const presence = await a.client.get('/v1/users/roamer/presence');
  assert.equal((presence.body as { connections: unknown[] }).connections.length, 1, presence.text);

  await probe.acl('SETUSER', 'default', 'allchannels');
  for (const line of await subscribers()) await probe.client('KILL', 'ID', /\bid=(\d+)/.exec(line)?.[1] ?? '0');
  // The heartbeat is 25 s away: only the pull after the re-subscribe brings them now.
  const [m2, m3] = [await client.next(8000), await client.next(8000)];
  assert.deepEqual([m2.t, m2.seq, m3.t, m3.seq], ['msg', 2, 'msg', 3]);
});
