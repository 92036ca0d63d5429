/**
 * A node's claim and lease outlive a FLUSHALL (DESIGN.md §9;
 * src/cluster/store-ownership.ts): its heartbeat writes them back. If another store
 * took the block in between, or another node wrote this store's lease (a copy of its
 * data dir running), the node stops minting ids (503) until it is alone again.
 * Bounded waits: the heartbeat is the only event (every 5 s). The three cases run at
 * once, each on a Redis and a node of its own: each waits on its node's heartbeats,
 * one to three of them, and those waits need not add up.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { LEASE_RENEW_MS, RESUME_MARGIN } from '../../src/cluster/store-ownership.js';
import { decodeMsgId } from '../../src/ids/msg-id.js';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const PREFIX = 'fl:';
const keys = new Keys(PREFIX);

/** A node on a private redis-server, and a client of the test's own on that Redis. */
async function nodeAlone(t: TestContext): Promise<{ server: InProcessServer; direct: Redis }> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const server = await startInProcess(t, { redisUrl: redis.url, redisPrefix: PREFIX, storeDurability: 'relaxed' });
  const { redis: direct } = await openInbox(t, redis.url, PREFIX);
  return { server, direct };
}

/** Waits for the node's next heartbeat or two. */
const HEARTBEATS = LEASE_RENEW_MS * 3;

describe('a FLUSHALL under a running node', { concurrency: true }, () => {
  test('after a FLUSHALL the node writes its claim and lease back', { timeout: 60_000 }, async (t) => {
    const { server, direct } = await nodeAlone(t);
    const claims = await direct.hgetall(keys.storePartitions());
    const storeId = claims['0'];
    assert.ok(storeId !== undefined, JSON.stringify(claims));
    assert.deepEqual(Object.keys(claims).sort((x, y) => Number(x) - Number(y)), ['0', '1', '2', '3', '4', '5', '6', '7']);
    const lease = JSON.parse(await direct.get(keys.storeLease(storeId)) ?? '{}') as { url?: string };
    assert.equal(lease.url, server.service.url);

    await direct.flushall();
    await waitUntil('claims and lease written back', async () =>
      (await direct.hlen(keys.storePartitions())) === 8 && (await direct.exists(keys.storeLease(storeId))) === 1, HEARTBEATS, 100);
    assert.deepEqual(await direct.hgetall(keys.storePartitions()), claims);
  });

  test('when another store took the block meanwhile, puts are refused and its partitions are read from that store, until the block is the node\'s own again', { timeout: 60_000 }, async (t) => {
    const { server, direct } = await nodeAlone(t);
    // One message in partition 3 (the one taken) and one in another, posted before.
    const posted = new Map<string, string>();
    for (let i = 0; posted.size < 2 && i < 200; i++) {
      const answer = await server.client.post('/v1/messages', { to: `part-${i}`, type: 't', data: i });
      assert.equal(answer.status, 201, answer.text);
      const { id } = answer.body as { id: string };
      const key = id.startsWith('03') ? 'taken' : 'kept';
      if (!posted.has(key)) posted.set(key, id);
    }
    const [taken, kept] = [posted.get('taken') as string, posted.get('kept') as string];
    await direct.flushall();
    await direct.hset(keys.storePartitions(), '3', 'intruder');
    await waitUntil('puts refused', async () => {
      const answer = await server.client.post('/v1/messages', { to: 'ivy', type: 't', data: 1 });
      if (answer.status === 201) return false;
      expectError(answer, 503, 'UNAVAILABLE', /writes are suspended: .*partition 3 is held by store intruder/);
      return true;
    }, HEARTBEATS, 100);
    // The intruder may have minted the same id for another message: not answered from
    // this store (its node is not running here: 503); a partition still the node's is.
    expectError(await server.client.get(`/v1/messages/${taken}`), 503, 'UNAVAILABLE', /partition 3 is held by store intruder/);
    assert.equal((await server.client.get(`/v1/messages/${kept}`)).status, 200);
    await direct.hdel(keys.storePartitions(), '3');
    await waitUntil('puts taken again', async () =>
      (await server.client.post('/v1/messages', { to: 'ivy', type: 't', data: 2 })).status === 201, HEARTBEATS, 100);
    assert.equal((await server.client.get(`/v1/messages/${taken}`)).status, 200, 'read locally again');
  });

  test('when another node writes this store\'s lease (a copy of the data dir running), puts are refused until it is gone', { timeout: 60_000 }, async (t) => {
    const { server, direct } = await nodeAlone(t);
    const claims = await direct.hgetall(keys.storePartitions());
    const storeId = claims['0'];
    assert.ok(storeId !== undefined, JSON.stringify(claims));
    const before = await server.client.post('/v1/messages', { to: 'ivy', type: 't', data: 'before the copy' });
    assert.equal(before.status, 201, before.text);
    const copy = JSON.stringify({ url: 'http://127.0.0.1:18999', node: 'node-copy', host: 'elsewhere', pid: 4242 });
    // The copy renews its lease as a live node does (more often, to win every round
    // here), and counts the node's renewals by what its writes replaced: a lease other
    // than its own is one the node wrote since.
    let nodeRenewals = 0;
    let copyWrites = 0;
    const renewCopy = async (): Promise<void> => {
      const replaced = await direct.set(keys.storeLease(storeId), copy, 'PX', 15_000, 'GET');
      if (replaced !== null && replaced !== copy) nodeRenewals += 1;
      copyWrites += 1;
    };
    /** Resolves once the copy has written again: a lease the node wrote before is counted. */
    const copyWroteAgain = async (): Promise<void> => {
      const writes = copyWrites;
      await waitUntil('the copy writes its lease again', async () => copyWrites > writes, 5000, 20);
    };
    let writing = renewCopy();
    await writing;
    const renewing = setInterval(() => { writing = renewCopy(); }, 200);
    const refused = (answer: Parameters<typeof expectError>[0]): string =>
      expectError(answer, 503, 'UNAVAILABLE', /writes are suspended: .*already served by node node-copy at http:\/\/127\.0\.0\.1:18999/);
    try {
      await waitUntil('puts refused', async () => {
        const answer = await server.client.post('/v1/messages', { to: 'ivy', type: 't', data: 3 });
        if (answer.status === 201) return false;
        refused(answer);
        return true;
      }, HEARTBEATS, 100);
      // Still refused after the node's next renewal (the copy is still there), asked
      // once the copy has written after it: the node has had that renewal's answer.
      await copyWroteAgain();
      const renewals = nodeRenewals;
      await waitUntil('the node renews its lease again', async () => nodeRenewals > renewals, HEARTBEATS, 20);
      await copyWroteAgain();
      refused(await server.client.post('/v1/messages', { to: 'ivy', type: 't', data: 3 }));
    } finally {
      clearInterval(renewing);
      // A write still on its way would put the lease back after the delete below.
      await writing;
    }
    // The copy stopped: its lease is gone (it drops it), and the node is alone again.
    await direct.del(keys.storeLease(storeId));
    let after: string | undefined;
    await waitUntil('puts taken again', async () => {
      const answer = await server.client.post('/v1/messages', { to: 'ivy', type: 't', data: 4 });
      if (answer.status === 201) after = (answer.body as { id: string }).id;
      return answer.status === 201;
    }, HEARTBEATS, 100);
    // None of the ids the copy may have minted meanwhile: the node's counters moved past them first.
    const [was, now] = [decodeMsgId((before.body as { id: string }).id), decodeMsgId(after as string)];
    assert.equal(now.partition, was.partition, 'one recipient, one partition');
    assert.ok(now.counter >= was.counter + RESUME_MARGIN, `counter ${was.counter} then ${now.counter}`);
  });
});
