/**
 * `client_msg_id` claims across the stores sharing one Redis
 * (src/cluster/client-id-claims.ts): when claims are made at all, and what a node whose
 * write outlived its claim does. Two real stores (their own data dirs and partition
 * blocks), one real inbox and a private redis-server; the only thing the test controls
 * is when store A's put goes ahead, as a node stalled mid-write (a freeze, a disk
 * stall) would let it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { ClientIdClaims } from '../../src/cluster/client-id-claims.js';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { StoreDirectory } from '../../src/cluster/store-directory.js';
import { StoreRouter } from '../../src/cluster/store-router.js';
import { PixiuError } from '../../src/errors.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { Ingest } from '../../src/ingest/ingest.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { Rooms } from '../../src/rooms/membership.js';
import type { MessageStore, NewMessage, PutResult } from '../../src/store/message-store.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import { openInbox, readWholeInbox } from '../harness/checks.js';
import { cleanupList, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { openStore } from '../store/fixtures/store-harness.js';

const files = cleanupList();
const keys = new Keys('px:');
let server: RedisServer;
let redis: Redis;
let inbox: Inbox;

before(async () => {
  server = await RedisServer.start();
  files.after(() => server.destroy());
  ({ redis, inbox } = await openInbox(files, server.url));
});

after(() => files.run());

/** Two stores as two nodes would have them, and a reader of both (what the store router is across nodes). */
async function twoStores(t: Parameters<typeof openStore>[0]): Promise<{ a: MessageStore; b: MessageStore; records: RecordReader }> {
  const a = await openStore(t, await tempDataDir(t), { partitions: 8, partitionBase: 0 });
  const b = await openStore(t, await tempDataDir(t), { partitions: 8, partitionBase: 8 });
  const owner = (id: string): MessageStore => (a.holds(id) ? a : b);
  const records: RecordReader = {
    isOpen: true,
    get: (id) => owner(id).get(id),
    getMany: async (ids) => Promise.all(ids.map((id) => owner(id).get(id))),
  };
  return { a, b, records };
}

test('claims are made while the Redis is shared by more than one store, or names none (lost), and stay on once it was shared', async () => {
  const claims = new ClientIdClaims(redis, keys, 'solo');
  await redis.hset(keys.storeDescriptions(), 'solo', '{}');
  await claims.refresh();
  assert.equal(claims.active, false, 'one store: its own index is enough');
  await redis.hset(keys.storeDescriptions(), 'other', '{}');
  await claims.refresh();
  assert.equal(claims.active, true);
  await redis.hdel(keys.storeDescriptions(), 'other');
  await claims.refresh();
  assert.equal(claims.active, true, 'once shared, for good (a FLUSHALL must not open a window)');
  await redis.del(keys.storeDescriptions());
  const fresh = new ClientIdClaims(redis, keys, 'new');
  await fresh.refresh();
  assert.equal(fresh.active, true, 'no store named: Redis lost them, other nodes may be writing theirs back');
});

test('a node whose write outlived its claim answers with the message another store settled meanwhile, and appends only that one', async (t) => {
  const { a, b, records } = await twoStores(t);
  await redis.hset(keys.storeDescriptions(), 'sa', '{}', 'sb', '{}');
  const claimsA = new ClientIdClaims(redis, keys, 'sa');
  const claimsB = new ClientIdClaims(redis, keys, 'sb');
  await Promise.all([claimsA.refresh(), claimsB.refresh()]);
  // Node A stalls between its claim and its store write.
  let resume!: () => void;
  const stalled = new Promise<void>((resolve) => { resume = resolve; });
  const realPut = a.put.bind(a);
  a.put = async (msg: NewMessage): Promise<PutResult> => {
    await stalled;
    return realPut(msg);
  };
  const ingestA = new Ingest({ store: a, inbox, claims: claimsA, records });
  const ingestB = new Ingest({ store: b, inbox, claims: claimsB, records });
  const body = { to: 'stalled-user', type: 't', data: { n: 1 }, client_msg_id: 'stall-1' };

  const onA = ingestA.sendToUsers(body);
  const claim = keys.clientIdClaim('stall-1');
  await waitForValue(claim, 'P|sa');
  // While A holds the claim, B refuses: it is being stored elsewhere.
  await assert.rejects(ingestB.sendToUsers(body), /being stored by another node now, or was when that node stopped/);
  assert.equal(await b.findByClientMsgId('stall-1'), null, 'B stored no copy of its own');
  // A's claim expires (30 s in life); B stores and settles the message.
  await redis.del(claim);
  const onB = await ingestB.sendToUsers(body);
  assert.equal(b.holds(onB.id), true);
  assert.equal(await redis.get(claim), onB.id);

  resume();
  const answer = await onA;
  assert.deepEqual(answer, { id: onB.id, recipients: onB.recipients, duplicate: true }, 'A answers with B\'s message');
  assert.equal(await redis.get(claim), onB.id, 'A did not take the claim back');
  assert.deepEqual((await readWholeInbox(inbox, 'stalled-user')).map((e) => e.id), [onB.id], 'one inbox entry');
});

test('a store write that fails releases the claim: the retry on another node is stored at once, not refused as being stored elsewhere', async (t) => {
  const { a, b, records } = await twoStores(t);
  await redis.hset(keys.storeDescriptions(), 'sa', '{}', 'sb', '{}');
  const claimsA = new ClientIdClaims(redis, keys, 'sa');
  const claimsB = new ClientIdClaims(redis, keys, 'sb');
  await Promise.all([claimsA.refresh(), claimsB.refresh()]);
  const ingestA = new Ingest({ store: a, inbox, claims: claimsA, records });
  const ingestB = new Ingest({ store: b, inbox, claims: claimsB, records });
  const body = { to: 'failed-write-user', type: 't', data: { n: 1 }, client_msg_id: 'failed-write-1' };
  const claim = keys.clientIdClaim('failed-write-1');

  // A's write fails after its claim was made (the store refuses writes, as a node
  // without its lease does).
  a.suspendWrites('writes suspended for the test');
  await assert.rejects(ingestA.sendToUsers(body), /writes suspended for the test/);
  // The release is not awaited by the failing request: wait for it, not for the 30 s expiry.
  await waitForValue(claim, null);
  const onB = await ingestB.sendToUsers(body);
  assert.equal(onB.duplicate, false);
  assert.equal(b.holds(onB.id), true);
  assert.equal(await redis.get(claim), onB.id);
  assert.deepEqual((await readWholeInbox(inbox, 'failed-write-user')).map((e) => e.id), [onB.id]);
});

test('a node whose write outlived its claim, finding another store\'s pending claim in its place when it settles, answers 503 (being stored elsewhere) and appends nothing', async (t) => {
  const { a, b, records } = await twoStores(t);
  await redis.hset(keys.storeDescriptions(), 'sa', '{}', 'sb', '{}');
  const claimsA = new ClientIdClaims(redis, keys, 'sa');
  const claimsB = new ClientIdClaims(redis, keys, 'sb');
  await Promise.all([claimsA.refresh(), claimsB.refresh()]);
  // Both nodes stall between their claim and their store write.
  const stall = (store: MessageStore): (() => void) => {
    let resume!: () => void;
    const stalled = new Promise<void>((resolve) => { resume = resolve; });
    const realPut = store.put.bind(store);
    store.put = async (msg: NewMessage): Promise<PutResult> => {
      await stalled;
      return realPut(msg);
    };
    return resume;
  };
  const resumeA = stall(a);
  const resumeB = stall(b);
  const ingestA = new Ingest({ store: a, inbox, claims: claimsA, records });
  const ingestB = new Ingest({ store: b, inbox, claims: claimsB, records });
  const body = { to: 'pending-settle-user', type: 't', data: { n: 1 }, client_msg_id: 'pending-settle-1' };
  const claim = keys.clientIdClaim('pending-settle-1');

  const onA = ingestA.sendToUsers(body);
  await waitForValue(claim, 'P|sa');
  await redis.del(claim); // A's claim expires
  const onB = ingestB.sendToUsers(body);
  await waitForValue(claim, 'P|sb');
  // A's write goes ahead while B's is still under way: its settle finds B's claim.
  resumeA();
  await assert.rejects(onA, /client_msg_id "pending-settle-1" is being stored by another node now, or was/);
  assert.equal(await redis.get(claim), 'P|sb', 'A did not take B\'s claim');
  assert.deepEqual(await readWholeInbox(inbox, 'pending-settle-user'), [], 'A appended nothing');
  resumeB();
  const stored = await onB;
  assert.equal(b.holds(stored.id), true);
  assert.deepEqual((await readWholeInbox(inbox, 'pending-settle-user')).map((e) => e.id), [stored.id], 'one inbox entry, B\'s');
});

test('a node whose write outlived its claim, finding it settled meanwhile on a message no store can read, answers 503 and appends nothing', async (t) => {
  const { a, b, records } = await twoStores(t);
  await redis.hset(keys.storeDescriptions(), 'sa', '{}', 'sb', '{}');
  const claimsA = new ClientIdClaims(redis, keys, 'sa');
  await claimsA.refresh();
  let resume!: () => void;
  const stalled = new Promise<void>((resolve) => { resume = resolve; });
  const realPut = a.put.bind(a);
  a.put = async (msg: NewMessage): Promise<PutResult> => {
    await stalled;
    return realPut(msg);
  };
  const ingestA = new Ingest({ store: a, inbox, claims: claimsA, records });
  const claim = keys.clientIdClaim('unreadable-1');
  const onA = ingestA.sendToUsers({ to: 'unreadable-user', type: 't', data: 1, client_msg_id: 'unreadable-1' });
  await waitForValue(claim, 'P|sa');
  // A's claim expired, and another node stored and settled a message in B's block
  // that B does not hold now (expired, say).
  const unreadable = encodeMsgId({ partition: 9, kind: MsgKind.user, counter: 999_999 });
  assert.equal(b.holds(unreadable), true);
  assert.equal(await b.get(unreadable), null);
  await redis.set(claim, unreadable);
  resume();
  await assert.rejects(onA, (err: unknown) => err instanceof PixiuError && err.code === 'UNAVAILABLE'
    && /the message first stored under client_msg_id "unreadable-1" cannot be read now; retry/.test(err.message));
  assert.equal(await redis.get(claim), unreadable, 'A did not take the claim');
  assert.deepEqual(await readWholeInbox(inbox, 'unreadable-user'), [], 'A appended nothing');
});

test('a room message to a room without members now, whose client_msg_id another store is storing, is 503 (retry), not 404', async (t) => {
  const { b, records } = await twoStores(t);
  await redis.hset(keys.storeDescriptions(), 'sa', '{}', 'sb', '{}');
  const claimsB = new ClientIdClaims(redis, keys, 'sb');
  await claimsB.refresh();
  // A's first attempt of it may have been to members who have all left since: only A's answer tells.
  await redis.set(keys.clientIdClaim('room-in-flight'), 'P|sa', 'PX', 30_000);
  const ingestB = new Ingest({ store: b, inbox, claims: claimsB, records, rooms: new Rooms(redis, keys, 100) });
  await assert.rejects(ingestB.sendToRoom({ room: 'left-room', type: 't', data: 1, client_msg_id: 'room-in-flight' }),
    (err: unknown) => err instanceof PixiuError && err.code === 'UNAVAILABLE' && /"room-in-flight" is being stored by another node now/.test(err.message));
  assert.equal(await b.findByClientMsgId('room-in-flight'), null, 'B stored nothing');
});

test('a claim naming a message that is gone is taken over by the store that stores it anew', async (t) => {
  const { b, records } = await twoStores(t);
  await redis.hset(keys.storeDescriptions(), 'sa', '{}', 'sb', '{}');
  const claimsB = new ClientIdClaims(redis, keys, 'sb');
  await claimsB.refresh();
  const gone = '0001000000fffff0';
  await redis.set(keys.clientIdClaim('gone-1'), gone);
  const ingestB = new Ingest({ store: b, inbox, claims: claimsB, records });
  const stored = await ingestB.sendToUsers({ to: 'gone-user', type: 't', data: 1, client_msg_id: 'gone-1' });
  assert.notEqual(stored.id, gone);
  assert.equal(await redis.get(keys.clientIdClaim('gone-1')), stored.id);
  // Settling never takes another store's claim: here a pending mark that is not B's.
  await redis.set(keys.clientIdClaim('other-1'), 'P|sa');
  assert.deepEqual(await claimsB.settle('other-1', stored.id, Date.now() + 60_000), { state: 'pending', storeId: 'sa' });
  assert.equal(await redis.get(keys.clientIdClaim('other-1')), 'P|sa');
  // Nor when it replaces a claim naming a message that is gone: another store that
  // took that claim's place meanwhile (its pending mark, or the MsgID it settled) keeps
  // it; overwritten, two messages would be stored and appended under one client_msg_id.
  for (const [cid, theirs, answer] of [['other-2', 'P|sa', { state: 'pending', storeId: 'sa' }], ['other-3', '0001000000000001', { state: 'stored', id: '0001000000000001' }]] as const) {
    await redis.set(keys.clientIdClaim(cid), theirs);
    assert.deepEqual(await claimsB.settle(cid, stored.id, Date.now() + 60_000, gone), answer);
    assert.equal(await redis.get(keys.clientIdClaim(cid)), theirs);
  }
});

test('a claim naming a message of a partition no store claims now (Redis lost the claims) is a 503, not stored anew', async (t) => {
  const { b } = await twoStores(t);
  await redis.hset(keys.storeDescriptions(), 'sa', '{}', 'sb', '{}');
  await redis.del(keys.storePartitions());
  const claimsB = new ClientIdClaims(redis, keys, 'sb');
  await claimsB.refresh();
  // B reads other stores' records as a node does: through the store router and the
  // claims in Redis, where A's partition 2 is claimed by no store now.
  const records = new StoreRouter({
    local: b, owners: new StoreDirectory(new PartitionClaims(redis, keys)),
    auth: { header: 'Bearer unused', refresh: async () => false }, timeoutMs: 1000, cacheBytes: 1 << 20,
  });
  const ofA = encodeMsgId({ partition: 2, kind: MsgKind.user, counter: 7 });
  await redis.set(keys.clientIdClaim('lost-claims'), ofA);
  const ingestB = new Ingest({ store: b, inbox, claims: claimsB, records });
  await assert.rejects(ingestB.sendToUsers({ to: 'lost-user', type: 't', data: 1, client_msg_id: 'lost-claims' }), /partition 2 is claimed by no store now/);
  assert.equal(await redis.get(keys.clientIdClaim('lost-claims')), ofA, 'the claim still names A\'s message');
  assert.deepEqual(await readWholeInbox(inbox, 'lost-user'), []);
});

/** Resolves once `key` holds `value` (the claim A makes before its stalled write; null: none). */
async function waitForValue(key: string, value: string | null): Promise<void> {
  for (let i = 0; i < 200 && (await redis.get(key)) !== value; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(await redis.get(key), value);
}

test("release drops only this store's own pending claim: another store's claim in its place is kept", async () => {
  const a = new ClientIdClaims(redis, keys, 'release-a');
  const b = new ClientIdClaims(redis, keys, 'release-b');
  const key = keys.clientIdClaim('release-1');

  assert.deepEqual(await a.claim('release-1'), { state: 'mine' });
  await a.release('release-1');
  assert.equal(await redis.get(key), null, 'its own pending mark is dropped');

  // A's claim expired and B took it: A's late release must not drop B's.
  assert.deepEqual(await b.claim('release-1'), { state: 'mine' });
  // B meeting its own pending mark again (a retry to the same node while the first
  // attempt is stored, or after its settle failed) leaves it to B's own index, not 503.
  assert.deepEqual(await b.claim('release-1'), { state: 'mine' }, 'its own pending claim is its own');
  assert.deepEqual(await b.lookup('release-1'), { state: 'mine' });
  await a.release('release-1');
  assert.equal(await redis.get(key), 'P|release-b');
  assert.deepEqual(await a.claim('release-1'), { state: 'pending', storeId: 'release-b' });

  // Nor a settled MsgID; the settled claim expires with its message.
  const expiresAt = Date.now() + 60_000;
  await b.settle('release-1', '0123456789abcdef', expiresAt);
  assert.equal(await redis.pexpiretime(key), expiresAt);
  await a.release('release-1');
  assert.equal(await redis.get(key), '0123456789abcdef');
});

test('a failed write leaves the claim to a retry of the same client_msg_id under way on the node: a retry on another node is refused, not stored twice', async () => {
  const a = new ClientIdClaims(redis, keys, 'again-a');
  const b = new ClientIdClaims(redis, keys, 'again-b');
  const key = keys.clientIdClaim('again-1');
  // Attempt 1 claims; attempt 2, a retry to the same node, finds the node's own mark and stores too.
  assert.deepEqual(await a.claim('again-1'), { state: 'mine' });
  assert.deepEqual(await a.claim('again-1'), { state: 'mine' });
  // Attempt 1's write fails: it releases, then ends (src/ingest/claimed-store.ts).
  await a.release('again-1');
  a.end('again-1');
  assert.equal(await redis.get(key), 'P|again-a', 'the mark attempt 2 stores under is kept');
  assert.deepEqual(await b.claim('again-1'), { state: 'pending', storeId: 'again-a' }, 'another node refuses the retry');
  b.end('again-1');
  // Attempt 2 fails too, attempt 1 over: nothing is being stored, its release drops the mark.
  await a.release('again-1');
  a.end('again-1');
  assert.equal(await redis.get(key), null);

  // A retry claiming in the tick the failed attempt releases, just before it: its claim
  // goes out first (at the end of the tick, on its own pipeline), so a release sent
  // after it, as an auto-pipelined one was, dropped it.
  const key2 = keys.clientIdClaim('again-2');
  assert.deepEqual(await a.claim('again-2'), { state: 'mine' });
  const retry = a.claim('again-2');
  const released = a.release('again-2');
  a.end('again-2');
  await released;
  assert.deepEqual(await retry, { state: 'mine' });
  assert.equal(await redis.get(key2), 'P|again-a', 'the retry\'s claim is kept');
  assert.deepEqual(await b.claim('again-2'), { state: 'pending', storeId: 'again-a' });
  b.end('again-2');
  a.end('again-2');
});

test('a first release sent in the tick of another command does not break the auto-pipeline (its script is defined with the claims, not at first use)', async (t) => {
  // A client of its own, on which nothing has defined the compare-and-delete script yet.
  const fresh = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  t.after(() => fresh.disconnect());
  const thrown: unknown[] = [];
  const onThrown = (err: unknown): void => { thrown.push(err); };
  process.on('uncaughtException', onThrown);
  t.after(() => process.off('uncaughtException', onThrown));
  const claims = new ClientIdClaims(fresh, keys, 'first-release');
  await fresh.set(keys.clientIdClaim('first-k'), 'P|first-release');
  // The GET makes this tick's auto-pipeline; the release's command joins it.
  const [got] = await Promise.all([fresh.get('unrelated'), claims.release('first-k')]);
  assert.equal(got, null);
  await fresh.ping(); // the pipeline's answers have all been handed out by now
  assert.deepEqual(thrown.map(String), [], 'nothing thrown out of the pipeline\'s answer');
  assert.equal(await fresh.exists(keys.clientIdClaim('first-k')), 0, 'the claim was released');
});

test('a settle after SCRIPT FLUSH (its EVALSHA answered NOSCRIPT) is sent again as EVAL and settles the claim', async () => {
  const claims = new ClientIdClaims(redis, keys, 'flushed');
  assert.deepEqual(await claims.claim('flushed-1'), { state: 'mine' });
  await redis.script('FLUSH');
  const expiresAt = Date.now() + 60_000;
  assert.deepEqual(await claims.settle('flushed-1', 'fedcba9876543210', expiresAt), { state: 'stored', id: 'fedcba9876543210' });
  assert.equal(await redis.get(keys.clientIdClaim('flushed-1')), 'fedcba9876543210');
});

test('a release after SCRIPT FLUSH (its EVALSHA answered NOSCRIPT) keeps the mark of a retry to the node that claimed before the answer', async () => {
  const claims = new ClientIdClaims(redis, keys, 'flushed-release');
  const key = keys.clientIdClaim('flushed-2');
  // Attempt A claims; its write fails.
  assert.deepEqual(await claims.claim('flushed-2'), { state: 'mine' });
  await redis.script('FLUSH');
  // As src/ingest/claimed-store.ts: the release is not waited for, A ends at once.
  const released = claims.release('flushed-2');
  claims.end('flushed-2');
  // Retry B to this node claims before the release's NOSCRIPT is answered: it finds the
  // node's own mark and stores under it.
  assert.deepEqual(await claims.claim('flushed-2'), { state: 'mine' });
  await released;
  assert.equal(await redis.get(key), 'P|flushed-release', 'B\'s mark is kept: a retry on another node is refused, not stored twice');
  claims.end('flushed-2');
  // With no attempt under way, a release after another SCRIPT FLUSH drops the mark (sent again as EVAL).
  assert.deepEqual(await claims.claim('flushed-2'), { state: 'mine' });
  await redis.script('FLUSH');
  const last = claims.release('flushed-2');
  claims.end('flushed-2');
  await last;
  assert.equal(await redis.get(key), null);
});
