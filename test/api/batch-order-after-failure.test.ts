/**
 * A batch's messages to one user land in batch order (docs/api.md), also when part of
 * the batch failed for want of Redis or the store and the producer retries it with the
 * same `client_msg_id`s (DESIGN.md §7: a retry completes the message): after an item's
 * retryable failure (503), no later item of its batch may reach its users first, or the
 * retry would append the earlier item after it.
 *
 * - Redis: the node's command connection is dropped mid-batch (test/harness/drop-proxy.ts,
 *   at a chosen append): the appends the node started while it was down failed, those
 *   it had sent were resent once it was back, and the batch's later run was sent then.
 * - Redis refused an append with an error reply that is a 503 (READONLY after a
 *   failover), then took writes again.
 * - The store: one partition's folder is a small tmpfs, filled (root with the right to
 *   mount one; skipped without it). There, too, an item failing before its appends
 *   fails only the later items, not the earlier ones whose appends were still waiting,
 *   also when an earlier one's put (another partition) ends after the failure.
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { partitionOfClientMsgId } from '../../src/store/route.js';
import { CommandSwapProxy } from '../harness/command-swap-proxy.js';
import { DropProxy } from '../harness/drop-proxy.js';
import { cleanupList, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import type { SeenCommand } from '../harness/proxy-link.js';
import { RedisServer } from '../harness/redis-server.js';
import { fill, mountSmallDisk } from '../harness/small-disk.js';

interface Item { status: number; id?: string }

const cleanup = cleanupList();
let redis: RedisServer;
let raw: Redis;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  raw = new Redis(redis.url);
  cleanup.after(() => raw.disconnect());
});
after(() => cleanup.run());

/** Posts `body` until every item is 2xx (at most 50 tries, 200 ms apart); answers the items. */
async function retryUntilDone(server: InProcessServer, body: unknown): Promise<Item[]> {
  let results: Item[] = [];
  for (let tries = 0; tries < 50; tries++) {
    results = ((await server.client.post('/v1/messages/batch', body)).body as { results: Item[] }).results;
    if (results.every((r) => r.status < 300)) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.ok(results.every((r) => r.status < 300), `the retries complete the batch: ${JSON.stringify(results.map((r) => r.status))}`);
  return results;
}

/** The MsgIDs in `user`'s inbox, in seq order. */
async function inboxIds(server: InProcessServer, user: string): Promise<string[]> {
  const page = await server.client.get(`/v1/users/${user}/messages?limit=1000`);
  return (page.body as { messages: { id: string }[] }).messages.map((m) => m.id);
}

/** An append (EVALSHA, or the EVAL it is sent again as) to the inbox `key`. */
function isAppendTo(key: string): (command: SeenCommand) => boolean {
  return (command) => (command.name === 'evalsha' || command.name === 'eval') && command.args.includes(key);
}

test('a batch retried after the node\'s Redis connection dropped mid-batch leaves every user\'s messages in batch order, its later run sent once the connection is back too', { timeout: 60_000 }, async (t) => {
  // The batch's first run, room items 0-2, is appended in batch order as one flow:
  // "hold" (room h), "drop" (room d), then 2,100 users (room all): more appends than
  // the pipeline keeps in flight (2,000), so the last ones wait. The node's command
  // connection drops between the appends to "hold" and "drop" (DropProxy): the reply to
  // "hold" reaches the node with the drop, so the append it starts on that reply fails
  // at once (UNAVAILABLE: the connection is down), and the flow's waiting ones fail
  // with it (item 2: 503); those it had sent from "drop" on are resent once it is back.
  // So the run ends once the connection is back, and the second run (user items 3-5,
  // to the same users) is sent then: what keeps it from reaching a user ahead of item
  // 2, failed there, is the batch's flow, broken by the first failure
  // (tick-pipeline.ts `#broken`): items 3-5 fail too, and the retry appends them after.
  const proxy = await DropProxy.start({ host: '127.0.0.1', port: redis.port }, { hold: isAppendTo('blip:{hold}:inbox'), drop: isAppendTo('blip:{drop}:inbox') });
  t.after(() => proxy.close());
  const server = await startInProcess(t, { redisUrl: proxy.url, redisPrefix: 'blip:' });
  const users = Array.from({ length: 2100 }, (_, i) => `u${i}`);
  const thirds = [users.slice(0, 700), users.slice(700, 1400), users.slice(1400)];
  const members: [string, string[]][] = [['h', ['hold']], ['d', ['drop']], ...thirds.map((third) => ['all', third] as [string, string[]])];
  for (const [room, some] of members) assert.equal((await server.client.request('PUT', `/v1/rooms/${room}/members`, { body: { users: some } })).status, 200);
  // Warm: the append script loaded (an EVALSHA answered NOSCRIPT would be held back too).
  assert.equal((await server.client.post('/v1/messages', { to: 'warm', type: 't', data: 0 })).status, 201);
  const body = { messages: [
    ...['h', 'd', 'all'].map((room, i) => ({ room, type: 't', data: i, client_msg_id: `blip-${i}` })),
    ...thirds.map((third, i) => ({ to: third, type: 't', data: 3 + i, client_msg_id: `blip-${3 + i}` })),
  ] };
  const first = ((await server.client.post('/v1/messages/batch', body)).body as { results: Item[] }).results;
  const statuses = first.map((r) => r.status);
  assert.ok(proxy.dropped !== undefined, 'the connection dropped');
  assert.equal(statuses[2], 503, `the drop failed item 2 (room all): ${JSON.stringify(statuses)}`);
  const ids = (await retryUntilDone(server, body)).map((r) => r.id);
  // Read from Redis in one pipeline: the inboxes' MsgIDs, in seq order, are what this
  // test is about (2,100 history pages would read 4,200 records from the store).
  const pipeline = raw.pipeline();
  for (const user of users) pipeline.xrange(`blip:{${user}}:inbox`, '-', '+');
  const inboxes = (await pipeline.exec() ?? []).map(([err, entries]) => {
    assert.ifError(err);
    return (entries as [string, string[]][]).map(([, fields]) => fields[fields.indexOf('id') + 1]);
  });
  let wrong = 0;
  inboxes.forEach((inbox, u) => {
    if (JSON.stringify(inbox) !== JSON.stringify([ids[2], ids[3 + Math.floor(u / 700)]])) wrong += 1;
  });
  assert.equal(wrong, 0, `${wrong} of ${users.length} users got the batch's messages out of batch order (first answer ${JSON.stringify(statuses)})`);
});

/**
 * A server on a data dir whose store partition holding `fullKey`'s messages is a 2 MiB
 * tmpfs, and a function that fills it (answering the filler file, to unlink); undefined
 * without the right to mount one (the test skips). Also the first `<prefix>-<n>` whose
 * messages go to another partition.
 */
async function withFullPartition(t: TestContext, fullKey: string, prefix: string): Promise<{ server: InProcessServer; fillIt: () => Promise<string>; other: string } | undefined> {
  // Undone last first: the server, the mount, the folder.
  const undo = cleanupList();
  t.after(() => undo.run());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-batch-order-'));
  undo.after(() => rm(dataDir, { recursive: true, force: true }));
  const full = partitionOfClientMsgId(fullKey, 8);
  let n = 0;
  while (partitionOfClientMsgId(`${prefix}-${n}`, 8) === full) n += 1;
  const disk = path.join(dataDir, 'xiu', String(full));
  await mkdir(disk, { recursive: true });
  if (!mountSmallDisk(disk, '2m')) {
    t.skip('no right to mount a tmpfs');
    return undefined;
  }
  undo.after(() => execFileSync('umount', ['-l', disk]));
  const server = await startInProcess(undo, { redisUrl: redis.url, redisPrefix: `${fullKey}:`, dataDir, partitions: '8' });
  return { server, fillIt: () => fill(disk), other: `${prefix}-${n}` };
}

test('a batch item refused by its full store partition lets no later item to the same user go first; retried, both land in batch order', { timeout: 60_000 }, async (t) => {
  const setup = await withFullPartition(t, 'order-0', 'order');
  if (setup === undefined) return;
  const { server, fillIt, other } = setup;
  const data = 'x'.repeat(20_000);
  const body = { messages: [
    { to: 'alice', type: 't', data: { n: 0, data }, client_msg_id: 'order-0' },
    { to: 'alice', type: 't', data: { n: 1, data }, client_msg_id: other },
  ] };
  const filler = await fillIt();
  const first = await server.client.post('/v1/messages/batch', body);
  assert.deepEqual((first.body as { results: Item[] }).results.map((r) => r.status), [503, 503], first.text);
  // Room again: the producer retries the batch until every item is done.
  await unlink(filler);
  const results = await retryUntilDone(server, body);
  assert.deepEqual(await inboxIds(server, 'alice'), results.map((r) => r.id), 'alice holds the batch\'s messages in batch order');
});

test('a room batch whose second item fails 503 (its store partition is full) does not fail the first, queued before it', { timeout: 60_000 }, async (t) => {
  const setup = await withFullPartition(t, 'late-1', 'early');
  if (setup === undefined) return;
  const { server, fillIt, other } = setup;
  assert.equal((await server.client.request('PUT', '/v1/rooms/r1/members', { body: { users: ['alice', 'bob'] } })).status, 200);
  const body = { messages: [
    { room: 'r1', type: 't', data: { n: 0 }, client_msg_id: other },
    { room: 'r1', type: 't', data: { n: 1, data: 'x'.repeat(20_000) }, client_msg_id: 'late-1' },
  ] };
  const filler = await fillIt();
  const first = await server.client.post('/v1/messages/batch', body);
  await unlink(filler);
  assert.deepEqual((first.body as { results: Item[] }).results.map((r) => r.status), [201, 503], first.text.slice(0, 400));
});

test('a room batch whose first item fails 503 (its store partition is full) lets no later item to its members go first; retried, both land in batch order', { timeout: 60_000 }, async (t) => {
  // Room items' appends are issued once every item has stored (or failed): item 1 is
  // stored and its appends wait behind item 0's failure, which must fail them too
  // (ingest.ts `#failedBeforeAppends` breaks the flow), else item 0's retry lands after it.
  const setup = await withFullPartition(t, 'room-order-0', 'room-order');
  if (setup === undefined) return;
  const { server, fillIt, other } = setup;
  assert.equal((await server.client.request('PUT', '/v1/rooms/r1/members', { body: { users: ['alice', 'bob'] } })).status, 200);
  const body = { messages: [
    { room: 'r1', type: 't', data: { n: 0, data: 'x'.repeat(20_000) }, client_msg_id: 'room-order-0' },
    { room: 'r1', type: 't', data: { n: 1 }, client_msg_id: other },
  ] };
  const filler = await fillIt();
  const first = await server.client.post('/v1/messages/batch', body);
  await unlink(filler);
  assert.deepEqual((first.body as { results: Item[] }).results.map((r) => r.status), [503, 503], first.text.slice(0, 400));
  const results = await retryUntilDone(server, body);
  for (const member of ['alice', 'bob']) {
    assert.deepEqual(await inboxIds(server, member), results.map((r) => r.id), `${member} holds the room batch's messages in batch order`);
  }
});

test('a batch item refused at once by its full store partition does not fail an earlier item to another user, stored in a healthy one', { timeout: 60_000 }, async (t) => {
  const setup = await withFullPartition(t, 'refused-1', 'healthy');
  if (setup === undefined) return;
  const { server, fillIt, other } = setup;
  const filler = await fillIt();
  try {
    // A failed write: the partition takes none until its disk has room to reopen.
    const failing = await server.client.post('/v1/messages', { to: 'carol', type: 't', data: 'x'.repeat(20_000), client_msg_id: 'refused-1' });
    assert.equal(failing.status, 503, failing.text);
    const answer = await server.client.post('/v1/messages/batch', { messages: [
      { to: 'alice', type: 't', data: { n: 0 }, client_msg_id: other },
      { to: 'bob', type: 't', data: { n: 1 }, client_msg_id: 'refused-1' },
    ] });
    assert.deepEqual((answer.body as { results: Item[] }).results.map((r) => r.status), [201, 503], answer.text.slice(0, 400));
  } finally {
    await unlink(filler);
  }
  assert.equal((await inboxIds(server, 'alice')).length, 1, 'alice got item 0');
});

test('an item whose append Redis refuses with an error reply that is a 503 (READONLY: a failover) lets no later item to the same user go first', { timeout: 60_000 }, async (t) => {
  // Redis refuses item 0's append to alice as a replica would (CommandSwapProxy: that
  // one EVALSHA goes to Redis as an EVAL answering READONLY) and takes item 1's, already
  // on the wire: room items, whose appends a run queues together once every item's
  // members are read, so both go out in one write, before the refusal comes back.
  // Breaking the flow (tick-pipeline.ts `#broken`) cannot stop an append already sent:
  // what keeps item 1 from landing first is the append chain (append-chain.ts: it names
  // item 0's append, not in the inbox, and is refused too, append-13.lua step 2a).
  const refusal = ['EVAL', "return redis.error_reply('READONLY You cannot write against a read only replica.')", '0'];
  const proxy = await CommandSwapProxy.start({ host: '127.0.0.1', port: redis.port }, isAppendTo('ro:{alice}:inbox'), refusal);
  t.after(() => proxy.close());
  const server = await startInProcess(t, { redisUrl: proxy.url, redisPrefix: 'ro:' });
  // Warm: the append script loaded (item 1's EVALSHA answered NOSCRIPT would be sent again after the refusal).
  assert.equal((await server.client.post('/v1/messages', { to: 'warm', type: 't', data: 0 })).status, 201);
  for (const room of ['r0', 'r1']) assert.equal((await server.client.request('PUT', `/v1/rooms/${room}/members`, { body: { users: ['alice'] } })).status, 200);
  const body = { messages: [0, 1].map((i) => ({ room: `r${i}`, type: 't', data: i, client_msg_id: `ro-${i}` })) };
  const first = await server.client.post('/v1/messages/batch', body);
  assert.equal(proxy.left, 0, 'Redis refused item 0\'s append');
  const statuses = (first.body as { results: Item[] }).results.map((r) => r.status);
  const results = await retryUntilDone(server, body);
  assert.deepEqual(await inboxIds(server, 'alice'), [results[0]?.id, results[1]?.id], `alice holds the batch's messages in batch order (first answer ${JSON.stringify(statuses)})`);
  assert.deepEqual(statuses, [503, 503], 'item 1 was refused with item 0');
});
