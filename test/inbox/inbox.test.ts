import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { countSocketWrites, waitUntil } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { createRedis, redisCall } from '../../src/redis/client.js';
import { isPixiuError } from '../../src/errors.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { APPEND_SHA, INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { evalScript } from '../../src/redis/scripts.js';
import { Keys } from '../../src/redis/keys.js';

let server: RedisServer;
let redis: Redis;
let inbox: Inbox;
const keys = new Keys('px:');

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  inbox = new Inbox(redis, { prefix: 'px:', cap: 10_000 });
});

after(async () => {
  await redis?.quit();
  await server?.destroy();
});

/** The n-th test MsgID. */
function msgId(n: number, kind: MsgKind = MsgKind.user): string {
  return encodeMsgId({ partition: 0, kind, counter: n });
}

/** Appends MsgIDs 1..count (offset by `from`) one after another; returns their seqs. */
async function appendMany(target: Inbox, uid: string, count: number, from = 0): Promise<number[]> {
  const seqs: number[] = [];
  for (let i = 1; i <= count; i++) seqs.push((await target.append(uid, msgId(from + i), MsgKind.user)).seq);
  return seqs;
}

function invalidRequest(err: unknown): boolean {
  return isPixiuError(err, 'INVALID_REQUEST');
}

test('appending the same MsgID again returns its seq as a duplicate and writes nothing', async () => {
  const uid = 'dup';
  const first = await inbox.append(uid, msgId(1), MsgKind.user);
  await inbox.append(uid, msgId(2), MsgKind.user);
  const xlen = await redis.xlen(keys.inbox(uid));
  const again = await inbox.append(uid, msgId(1), MsgKind.user);
  assert.deepEqual(first, { seq: 1, epoch: first.epoch, duplicate: false, nodes: [] });
  assert.deepEqual(again, { seq: 1, epoch: first.epoch, duplicate: true, nodes: [] });
  assert.equal(await redis.xlen(keys.inbox(uid)), xlen, 'XLEN does not grow');
  assert.equal((await inbox.append(uid, msgId(3), MsgKind.user)).seq, 3, 'the duplicate used no seq');
});

test('appends to one user issued in one tick get seqs in issue order, across pipeline batches', async () => {
  const uid = 'one-tick';
  const count = 1200; // more than one pipeline batch (500)
  const results = await Promise.all(Array.from({ length: count }, (_, i) => inbox.append(uid, msgId(i + 1), MsgKind.user)));
  assert.deepEqual(results.map((r) => r.seq), Array.from({ length: count }, (_, i) => i + 1));
  const page = await inbox.range(uid, 0, count);
  assert.deepEqual(page.entries.map((e) => e.id), Array.from({ length: count }, (_, i) => msgId(i + 1)));
});

test('appends issued in one tick leave in one socket write per batch of 500, not one write each', async (t) => {
  const own = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  t.after(() => own.disconnect());
  const target = new Inbox(own, { prefix: 'px:', cap: 10_000 });
  await target.append('writes-warm', msgId(1), MsgKind.user); // loads the script on this connection
  const writes = countSocketWrites(own);
  for (const count of [1, 100, 1200]) {
    writes.reset();
    const results = await Promise.all(Array.from({ length: count }, (_, i) => target.append(`writes-${count}-${i % 7}`, msgId(i + 1), MsgKind.user)));
    assert.equal(results.length, count);
    assert.equal(writes.count, Math.ceil(count / 500), `${count} appends took ${writes.count} socket writes`);
  }
});

test('the epoch is created by the first append and stays the same afterwards', async () => {
  const uid = 'epoch';
  assert.equal((await inbox.range(uid, 0, 10)).epoch, null, 'no inbox, no epoch');
  const first = await inbox.append(uid, msgId(1), MsgKind.user);
  assert.match(first.epoch, /^[A-Za-z0-9_-]{12}$/);
  const created = await redis.hget(keys.meta(uid), 'created');
  assert.ok(Number(created) > 0, 'created is recorded in ms');
  for (let i = 2; i <= 5; i++) assert.equal((await inbox.append(uid, msgId(i), MsgKind.user)).epoch, first.epoch);
  assert.equal((await inbox.range(uid, 0, 10)).epoch, first.epoch);
  assert.equal(await redis.hget(keys.meta(uid), 'created'), created, 'created is written once');
});

test('the counter key lost while the stream remains never makes a seq be reused', async () => {
  const uid = 'counter-lost';
  await appendMany(inbox, uid, 5);
  await redis.hdel(keys.meta(uid), 'seq');
  const afterHdel = await inbox.append(uid, msgId(6), MsgKind.user);
  assert.equal(afterHdel.seq, 6, 'continues above the last entry after HDEL meta seq');

  await redis.del(keys.meta(uid));
  const afterDel = await inbox.append(uid, msgId(7), MsgKind.user);
  assert.equal(afterDel.seq, 7, 'continues above the last entry after DEL meta');
  assert.notEqual(afterDel.epoch, afterHdel.epoch, 'a lost meta hash means a new epoch (clients are told reset)');
  const page = await inbox.range(uid, 0, 100);
  assert.deepEqual(page.entries.map((e) => e.seq), [1, 2, 3, 4, 5, 6, 7]);

  // A read with the counter lost still reports the latest seq (from the stream).
  await redis.hdel(keys.meta(uid), 'seq');
  const read = await inbox.range(uid, 5, 100);
  assert.deepEqual([read.firstSeq, read.latestSeq, read.entries.map((e) => e.seq)], [1, 7, [6, 7]]);
});

test('the stream lost while the counter remains never makes a seq be reused: every append stores the seq it assigned', async () => {
  const uid = 'stream-lost';
  const { epoch } = await inbox.append(uid, msgId(1), MsgKind.user);
  await appendMany(inbox, uid, 2, 1);
  assert.equal(await redis.hget(keys.meta(uid), 'seq'), '3', 'the counter is the last seq assigned');
  await redis.del(keys.inbox(uid));
  assert.deepEqual(await inbox.range(uid, 0, 10), { epoch, firstSeq: 4, latestSeq: 3, entries: [] });
  assert.equal((await inbox.append(uid, msgId(4), MsgKind.user)).seq, 4);
});

test('the top entries deleted by hand (XDEL) with the counter lost or behind: the next append takes a seq above every seq the stream ever held, with a new epoch when the meta hash was lost', async () => {
  // The reviewer's F1: append-7 took 1 + max(counter, last entry), which XADD refused
  // (at or below the stream's last-generated ID), after it had dropped the cursors.
  const uid = 'top-deleted';
  const k = keys.user(uid);
  const [, , third] = await appendMany(inbox, uid, 3);
  assert.equal(third, 3);
  const { epoch } = await inbox.append(uid, msgId(4), MsgKind.user);
  await inbox.ack(uid, 'phone', 2, epoch);
  assert.equal(await redis.xdel(k.inbox, '4-0'), 1);
  await redis.del(k.meta);
  const fifth = await inbox.append(uid, msgId(5), MsgKind.user);
  assert.deepEqual([fifth.seq, fifth.duplicate], [5, false], 'above seq 4, deleted by hand');
  assert.notEqual(fifth.epoch, epoch, 'a lost meta hash means a new epoch');
  assert.deepEqual(await inbox.cursors(uid), {}, 'the cursors of the lost epoch go with the append that made the new one');
  const next = await inbox.append(uid, msgId(6), MsgKind.user);
  assert.deepEqual([next.seq, next.epoch], [6, fifth.epoch]);
  const page = await inbox.range(uid, 0, 10);
  assert.deepEqual([page.epoch, page.latestSeq, page.entries.map((e) => e.seq)], [fifth.epoch, 6, [1, 2, 3, 5, 6]]);

  // Every entry deleted (the stream is there, empty) and the meta hash lost.
  const emptied = keys.user('all-deleted');
  await appendMany(inbox, 'all-deleted', 2);
  assert.equal(await redis.xdel(emptied.inbox, '1-0', '2-0'), 2);
  await redis.del(emptied.meta);
  assert.equal((await inbox.append('all-deleted', msgId(3), MsgKind.user)).seq, 3);

  // The meta hash kept, its counter behind the top entry deleted by hand: seq 3 is not given again.
  const behind = keys.user('counter-behind');
  const { epoch: kept } = await inbox.append('counter-behind', msgId(1), MsgKind.user);
  await appendMany(inbox, 'counter-behind', 2, 1);
  assert.equal(await redis.xdel(behind.inbox, '3-0'), 1);
  await redis.hset(behind.meta, 'seq', '2');
  const after = await inbox.append('counter-behind', msgId(4), MsgKind.user);
  assert.deepEqual([after.seq, after.epoch], [4, kept]);
});

test('an append that fails writes nothing: the cursors of an inbox whose meta hash was lost stay until an append goes through', async () => {
  const uid = 'append-fails';
  const k = keys.user(uid);
  await appendMany(inbox, uid, 2);
  await inbox.ack(uid, 'phone', 2);
  await redis.del(k.meta);
  // A key of the user of another type (an operator's mistake): the append fails WRONGTYPE.
  for (const broken of [k.ids, k.inbox]) {
    const dump = await redis.dumpBuffer(broken);
    await redis.del(broken);
    await redis.set(broken, 'not a stream or a set');
    await assert.rejects(inbox.append(uid, msgId(3), MsgKind.user));
    assert.deepEqual(await inbox.cursors(uid), { phone: 2 }, `the cursors stay after a failed append (${broken})`);
    assert.equal(await redis.exists(k.meta), 0, 'no epoch was made');
    await redis.del(broken);
    assert.ok(dump !== null);
    await redis.restore(broken, 0, dump);
  }
  const made = await inbox.append(uid, msgId(3), MsgKind.user);
  assert.equal(made.seq, 3);
  assert.deepEqual(await inbox.cursors(uid), {}, 'dropped with the new epoch');
});

test('cap 10 and 25 appends keep exactly seqs 16..25 in the stream and the ids set', async () => {
  const small = new Inbox(redis, { prefix: 'px:', cap: 10 });
  const uid = 'capped';
  for (let n = 1; n <= 25; n++) {
    await small.append(uid, msgId(n), MsgKind.user);
    assert.equal(await redis.zcard(keys.ids(uid)), Math.min(n, 10), `the ids set after ${n} appends holds the stream's window`);
  }
  const page = await small.range(uid, 0, 100);
  assert.equal(page.firstSeq, 16);
  assert.equal(page.latestSeq, 25);
  assert.deepEqual(page.entries.map((e) => e.seq), [16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
  assert.deepEqual(page.entries.map((e) => e.id), Array.from({ length: 10 }, (_, i) => msgId(16 + i)));
  assert.equal(await redis.xlen(keys.inbox(uid)), 10);
  const ids = await redis.zrange(keys.ids(uid), '0', '-1', 'WITHSCORES');
  assert.equal(ids.length, 20, 'the ids set is trimmed to the same 10');
  assert.equal(ids[1], '16', 'its lowest seq is the first retained');
  assert.equal((await small.append(uid, msgId(25), MsgKind.user)).duplicate, true, 'a retained MsgID is still deduplicated');
});

test('an ack cursor never decreases, per device, devices independent', async () => {
  const uid = 'acks';
  assert.deepEqual(await inbox.cursors(uid), {});
  await appendMany(inbox, uid, 7);
  assert.equal(await inbox.ack(uid, 'phone', 5), 5);
  assert.equal(await inbox.ack(uid, 'phone', 3), 5, 'acking below the cursor keeps it');
  assert.equal(await inbox.ack(uid, 'laptop', 2), 2);
  assert.deepEqual(await inbox.cursors(uid), { phone: 5, laptop: 2 });
  assert.equal(await inbox.ack(uid, 'phone', 7), 7);
  assert.equal(await inbox.ack(uid, 'laptop', 0), 2);
  assert.deepEqual(await inbox.cursors(uid), { phone: 7, laptop: 2 });
  // A 15-digit seq is stored exactly (not in the 14 digits of Lua's tostring).
  const big = 123_456_789_012_345;
  assert.equal(await inbox.ack(uid, 'phone', big), big);
  assert.deepEqual(await inbox.cursors(uid), { phone: big, laptop: 2 });
});

test('a device\'s cursor is read with the epoch it counts in; none for a device that never acked', async () => {
  const uid = 'device-cursor';
  const first = await inbox.append(uid, msgId(1), MsgKind.user);
  await appendMany(inbox, uid, 3);
  assert.equal(await inbox.deviceCursor(uid, 'phone'), undefined);
  await inbox.ack(uid, 'phone', 3);
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 3, epoch: first.epoch });
  assert.equal(await inbox.deviceCursor(uid, 'constructor'), undefined, 'only its own entry');
  // The inbox's meta hash lost (the cursors kept): a cursor of no known epoch.
  await redis.del(keys.meta(uid));
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 3, epoch: undefined });
  await assert.rejects(inbox.deviceCursor(uid, 'no spaces'), (err) => isPixiuError(err, 'INVALID_REQUEST'));
});

test('range pages through 250 entries 100 at a time, in order, continuing after the last seq', async () => {
  const uid = 'pages';
  const appended = await Promise.all(Array.from({ length: 250 }, (_, i) => inbox.append(uid, msgId(i + 1), MsgKind.user)));
  const seqToId = new Map(appended.map((r, i) => [r.seq, msgId(i + 1)]));
  const sizes: number[] = [];
  const seen: number[] = [];
  let afterSeq = 0;
  for (;;) {
    const page = await inbox.range(uid, afterSeq, 100);
    assert.equal(page.firstSeq, 1);
    assert.equal(page.latestSeq, 250);
    if (page.entries.length === 0) break;
    sizes.push(page.entries.length);
    for (const e of page.entries) {
      seen.push(e.seq);
      assert.equal(e.id, seqToId.get(e.seq));
      assert.equal(e.malformed === true ? undefined : e.kind, MsgKind.user);
    }
    afterSeq = page.entries.at(-1)?.seq ?? afterSeq;
  }
  assert.deepEqual(sizes, [100, 100, 50]);
  assert.deepEqual(seen, Array.from({ length: 250 }, (_, i) => i + 1));
});

test('range edge values: no inbox, after_seq at or beyond latest', async () => {
  assert.deepEqual(await inbox.range('nobody', 0, 10), { epoch: null, firstSeq: 1, latestSeq: 0, entries: [] });
  assert.deepEqual(await inbox.range('nobody', 42, 10), { epoch: null, firstSeq: 1, latestSeq: 0, entries: [] });
  const uid = 'edges';
  const { epoch } = await inbox.append(uid, msgId(1), MsgKind.user);
  await inbox.append(uid, msgId(2), MsgKind.user);
  // The newest entry comes whatever after_seq is (range-3.lua).
  const newest = { seq: 2, id: msgId(2), kind: MsgKind.user };
  assert.deepEqual(await inbox.range(uid, 2, 10), { epoch, firstSeq: 1, latestSeq: 2, entries: [], newest });
  assert.deepEqual(await inbox.range(uid, 99, 10), { epoch, firstSeq: 1, latestSeq: 2, entries: [], newest });
  assert.deepEqual((await inbox.range(uid, 1, 10)).entries.map((e) => e.seq), [2]);
});

test('a room message keeps its kind and room in the entry', async () => {
  const uid = 'roomy';
  await inbox.append(uid, msgId(1, MsgKind.room), MsgKind.room, { room: 'team-7' });
  await inbox.append(uid, msgId(2), MsgKind.user);
  const { entries } = await inbox.range(uid, 0, 10);
  assert.deepEqual(entries, [
    { seq: 1, id: msgId(1, MsgKind.room), kind: MsgKind.room, room: 'team-7' },
    { seq: 2, id: msgId(2), kind: MsgKind.user },
  ]);
  // The longest room id: 128 code points (src/api/schemas.ts), each outside the BMP:
  // 256 UTF-16 code units, the most an entry takes.
  const longest = '\u{1F600}'.repeat(128);
  assert.equal(longest.length, 256);
  await inbox.append(uid, msgId(3, MsgKind.room), MsgKind.room, { room: longest });
  assert.deepEqual((await inbox.range(uid, 2, 10)).entries, [{ seq: 3, id: msgId(3, MsgKind.room), kind: MsgKind.room, room: longest }]);
  await assert.rejects(inbox.append(uid, msgId(4, MsgKind.room), MsgKind.room, { room: `${longest}r` }), invalidRequest);
});

test('after FLUSHALL the next append creates a new epoch and starts at seq 1', async () => {
  const uid = 'flushed';
  await appendMany(inbox, uid, 3);
  const before = await inbox.append(uid, msgId(4), MsgKind.user);
  assert.equal(before.seq, 4);
  await redis.flushall();
  const afterFlush = await inbox.append(uid, msgId(5), MsgKind.user);
  assert.equal(afterFlush.seq, 1);
  assert.equal(afterFlush.duplicate, false);
  assert.notEqual(afterFlush.epoch, before.epoch);
});

test('appends go on after SCRIPT FLUSH (NOSCRIPT): each call of a tick is sent again and loads the script', async () => {
  const uid = 'noscript';
  await appendMany(inbox, uid, 2);
  await redis.script('FLUSH');
  // One tick of appends: every EVALSHA of it meets NOSCRIPT and is sent again.
  const results = await Promise.all([3, 4, 5].map((n) => inbox.append(uid, msgId(n), MsgKind.user)));
  assert.deepEqual(results.map((r) => [r.seq, r.duplicate]), [[3, false], [4, false], [5, false]]);
  const [exists] = await redis.script('EXISTS', APPEND_SHA) as number[];
  assert.equal(exists, 1, 'the script is loaded again');
  assert.equal((await inbox.append(uid, msgId(6), MsgKind.user)).seq, 6);
  assert.equal(await redis.xlen(keys.inbox(uid)), 6, 'each message appended once');
});

test('a user keeps at most deviceCursors ack cursors: a new device past it drops those furthest behind, never its own', async () => {
  const few = new Inbox(redis, { prefix: 'px:', cap: 10_000, deviceCursors: 3 });
  const uid = 'many-devices';
  for (let i = 1; i <= 10; i++) await few.append(uid, msgId(i), MsgKind.user);
  await few.ack(uid, 'phone', 9);
  await few.ack(uid, 'tablet', 4);
  await few.ack(uid, 'web-a', 7);
  assert.deepEqual(await few.cursors(uid), { phone: 9, tablet: 4, 'web-a': 7 });
  // A fourth device: the one furthest behind (tablet, at 4) goes.
  await few.ack(uid, 'web-b', 8);
  assert.deepEqual(await few.cursors(uid), { phone: 9, 'web-a': 7, 'web-b': 8 });
  // Moving a kept cursor adds no field and drops nothing.
  await few.ack(uid, 'web-a', 10);
  assert.deepEqual(await few.cursors(uid), { phone: 9, 'web-a': 10, 'web-b': 8 });
  // A new device behind all the others keeps its own cursor; the lowest of the others goes.
  await few.ack(uid, 'web-c', 1);
  assert.deepEqual(await few.cursors(uid), { phone: 9, 'web-a': 10, 'web-c': 1 });
  // A hundred devices in turn: the hash stays at three.
  for (let i = 0; i < 100; i++) await few.ack(uid, `session-${i}`, 10);
  assert.equal(await redis.hlen(keys.acks(uid)), 3);
  // Devices tied furthest behind go by device id, lowest first.
  const tied = 'tied-devices';
  await few.append(tied, msgId(1), MsgKind.user);
  for (const device of ['dev-b', 'dev-a', 'dev-c']) await few.ack(tied, device, 1);
  await few.ack(tied, 'dev-d', 1);
  assert.deepEqual(await few.cursors(tied), { 'dev-b': 1, 'dev-c': 1, 'dev-d': 1 });
  // The limit lowered (a restart with a smaller setting): moving a kept cursor adds no field and drops nothing.
  const fewer = new Inbox(redis, { prefix: 'px:', cap: 10_000, deviceCursors: 2 });
  await fewer.ack(tied, 'dev-b', 1);
  await fewer.ack(tied, 'dev-c', 2);
  assert.deepEqual(await fewer.cursors(tied), { 'dev-b': 1, 'dev-c': 2, 'dev-d': 1 });
  assert.throws(() => new Inbox(redis, { prefix: 'px:', cap: 10, deviceCursors: 0 }), invalidRequest);
});

test('an inbox keeps its keys until the grace after the latest content expiry appended, never less', async () => {
  const grace = 60_000;
  const kept = new Inbox(redis, { prefix: 'px:', cap: 10_000, retentionGraceMs: grace });
  const uid = 'retained';
  const k = keys.user(uid);
  const expiry = async (): Promise<number[]> => Promise.all([k.inbox, k.meta, k.ids, k.acks].map((key) => redis.pexpiretime(key)));
  const later = Date.now() + 3_600_000;
  await kept.append(uid, msgId(1), MsgKind.user, { expiresAt: later });
  await kept.ack(uid, 'phone', 1);
  assert.deepEqual(await expiry(), [later + grace, later + grace, later + grace, later + grace], 'every key, the acks made after the append too');
  assert.equal(await redis.hget(k.meta, 'keep'), String(later + grace));

  // Content that expires sooner (a shorter ttl), or the same message again: no change.
  await kept.append(uid, msgId(2), MsgKind.user, { expiresAt: later - 1_000 });
  await kept.append(uid, msgId(1), MsgKind.user, { expiresAt: later + 10 * grace });
  assert.deepEqual(await expiry(), [later + grace, later + grace, later + grace, later + grace]);
  // Content that expires within the grace of the last setting: no change either (the keys
  // already outlive it), so steady traffic touches the expiry once per grace period.
  await kept.append(uid, msgId(3), MsgKind.user, { expiresAt: later + grace - 1 });
  assert.equal(await redis.pexpiretime(k.inbox), later + grace);
  // Content that outlives the keys moves them all.
  await kept.append(uid, msgId(4), MsgKind.user, { expiresAt: later + grace + 5 });
  const moved = later + 2 * grace + 5;
  assert.deepEqual(await expiry(), [moved, moved, moved, moved]);
  // Content that expires exactly when the keys do (at `keep`, not after) moves them too.
  await kept.append(uid, msgId(5), MsgKind.user, { expiresAt: moved });
  assert.deepEqual(await expiry(), [moved + grace, moved + grace, moved + grace, moved + grace]);

  // Content already expired (a clock behind, a slow request): kept from now, never deleted.
  const stale = 'retained-stale';
  const before = Date.now();
  await kept.append(stale, msgId(1), MsgKind.user, { expiresAt: 5 });
  const at = await redis.pexpiretime(keys.inbox(stale));
  assert.ok(at >= before + grace && at <= Date.now() + grace, `expires at ${at}, not ${before} + ${grace}`);
  assert.equal((await kept.range(stale, 0, 10)).latestSeq, 1);
  // The earliest expiry there is (0, the Unix epoch) is one too, not a malformed one.
  await kept.append(stale, msgId(2), MsgKind.user, { expiresAt: 0 });
  assert.equal((await kept.range(stale, 0, 10)).latestSeq, 2);

  // No content expiry given: the longest a message is kept (30 days) from now.
  const plain = 'retained-default';
  const start = Date.now();
  await kept.append(plain, msgId(1), MsgKind.user);
  const longest = await redis.pexpiretime(keys.inbox(plain));
  assert.ok(longest >= start + 30 * 86_400_000 + grace && longest <= Date.now() + 30 * 86_400_000 + grace);

  assert.throws(() => new Inbox(redis, { prefix: 'px:', cap: 10, retentionGraceMs: -1 }), invalidRequest);
  assert.throws(() => new Inbox(redis, { prefix: 'px:', cap: 10, retentionGraceMs: 31 * 86_400_000 }), invalidRequest);
  await assert.rejects(kept.append(uid, msgId(9), MsgKind.user, { expiresAt: 1.5 }), invalidRequest);
  await assert.rejects(kept.appendEach([uid], msgId(9), MsgKind.user, { expiresAt: -1 }), invalidRequest);
});

test('an expired inbox is gone with its cursors: the next append starts a new epoch at seq 1', async () => {
  const quick = new Inbox(redis, { prefix: 'px:', cap: 10_000, retentionGraceMs: 0 });
  const uid = 'expiring';
  const k = keys.user(uid);
  const first = await quick.append(uid, msgId(1), MsgKind.user, { expiresAt: Date.now() + 150 });
  const [second] = await quick.appendEach([uid], msgId(2), MsgKind.room, { room: 'r', expiresAt: Date.now() + 200 });
  assert.equal(second?.status === 'fulfilled' && second.value.seq, 2);
  await quick.ack(uid, 'phone', 2, first.epoch);
  assert.ok(await redis.pexpiretime(k.acks) > 0, 'the cursors expire with the inbox');
  await waitUntil('the inbox and its cursors expired', async () => await redis.exists(k.inbox, k.meta, k.ids, k.acks) === 0, 10_000, 20);

  // A device acking into the gone inbox leaves nothing behind.
  assert.equal(await quick.ack(uid, 'phone', 2), 0);
  assert.equal(await quick.ack(uid, 'laptop', 2, first.epoch), null, 'an epoch of an inbox that is gone');
  assert.equal(await redis.exists(k.acks), 0);
  assert.deepEqual(await quick.range(uid, 0, 10), { epoch: null, firstSeq: 1, latestSeq: 0, entries: [] });
  const next = await quick.append(uid, msgId(3), MsgKind.user, { expiresAt: Date.now() + 60_000 });
  assert.equal(next.seq, 1);
  assert.notEqual(next.epoch, first.epoch);
  assert.deepEqual(await quick.cursors(uid), {});
});

test('script error replies map to catalogue codes', async () => {
  const k = keys.user('scripted');
  await assert.rejects(redisCall(() => evalScript(redis, INBOX_SCRIPTS.ack, [k.acks, k.meta], ['phone', 'abc', '', '100'])), invalidRequest);
  await assert.rejects(redisCall(() => evalScript(redis, INBOX_SCRIPTS.ack, [k.acks, k.meta], ['phone', '-1', '', '100'])), invalidRequest);
  await assert.rejects(redisCall(() => evalScript(redis, INBOX_SCRIPTS.ack, [k.acks, k.meta], ['', '1', '', '100'])), invalidRequest);
  await assert.rejects(redisCall(() => evalScript(redis, INBOX_SCRIPTS.ack, [k.acks, k.meta], ['phone', '1', '', '0'])), invalidRequest);
  const append = (...argv: string[]) => redisCall(() => evalScript(redis, INBOX_SCRIPTS.append, [k.inbox, k.meta, k.ids, k.conns, k.acks], argv));
  await assert.rejects(append(msgId(1), '9', '10', 'e', '0', '', '0', '0', '0'), invalidRequest);
  await assert.rejects(append('XYZ', '1', '10', 'e', '0', '', '0', '0', '0'), invalidRequest);
  await assert.rejects(append(msgId(1), '1', '0', 'e', '0', '', '0', '0', '0'), invalidRequest);
  await assert.rejects(append(msgId(1), '1', '10', 'e', '0', '', '-5', '0', '0'), invalidRequest, 'a negative content expiry');
  await assert.rejects(append(msgId(1), '1', '10', 'e', '0', '', '0', '1e9', '0'), invalidRequest, 'a grace that is not an integer');
  await assert.rejects(append(msgId(1), '1', '10', 'e', '0', ''), invalidRequest, 'append-6 arguments (no expiry, no grace)');
  await assert.rejects(append(msgId(1), '1', '10', 'e', '0', '', '0', '0'), invalidRequest, 'append-8 arguments (no generation)');
  await assert.rejects(append(msgId(1), '1', '10', 'e', '0', '', '0', '0', '-1'), invalidRequest, 'a negative generation');
  await assert.rejects(redisCall(() => evalScript(redis, INBOX_SCRIPTS.range, [k.inbox, k.meta], ['0', '0'])), invalidRequest);
  await assert.rejects(redisCall(() => evalScript(redis, INBOX_SCRIPTS.range, [k.inbox, k.meta], ['1.5', '10'])), invalidRequest);
  const err = await redisCall(() => evalScript(redis, INBOX_SCRIPTS.ack, [k.acks, k.meta], ['phone', 'abc', '', '100'])).catch((e: unknown) => e);
  assert.ok(isPixiuError(err, 'INVALID_REQUEST'));
  assert.equal(err.message, 'seq must be a non-negative integer', 'the code is stripped from the message');
  assert.equal(await redis.exists(k.inbox, k.meta, k.ids, k.acks), 0, 'a rejected call writes nothing');
});

test('malformed arguments are INVALID_REQUEST and nothing is sent', async () => {
  const uid = 'args';
  await assert.rejects(inbox.range(uid, -1, 10), invalidRequest);
  await assert.rejects(inbox.range(uid, 1.5, 10), invalidRequest);
  await assert.rejects(inbox.range(uid, Number.NaN, 10), invalidRequest);
  await assert.rejects(inbox.range(uid, 0, 0), invalidRequest);
  await assert.rejects(inbox.range(uid, 0, 10_001), invalidRequest);
  await assert.rejects(inbox.ack(uid, 'phone', -1), invalidRequest);
  await assert.rejects(inbox.ack(uid, 'phone', 2 ** 53), invalidRequest);
  await assert.rejects(inbox.ack(uid, 'bad device!', 1), invalidRequest);
  await assert.rejects(inbox.append(uid, 'not-a-msg-id', MsgKind.user), invalidRequest);
  await assert.rejects(inbox.append(uid, msgId(0xabc).toUpperCase(), MsgKind.user), invalidRequest);
  await assert.rejects(inbox.append(uid, msgId(1), MsgKind.room, { room: '' }), invalidRequest);
  await assert.rejects(inbox.append('', msgId(1), MsgKind.user), invalidRequest);
  await assert.rejects(inbox.append('x'.repeat(257), msgId(1), MsgKind.user), invalidRequest);
  assert.throws(() => new Inbox(redis, { prefix: 'px:', cap: 0 }), invalidRequest);
  assert.throws(() => new Inbox(redis, { prefix: 'p{x}', cap: 10 }), invalidRequest);
  const k = keys.user(uid);
  assert.equal(await redis.exists(k.inbox, k.meta, k.ids, k.acks), 0);
});

test('append names the nodes of the user\'s live presence entries, once each, for a duplicate too', async () => {
  const uid = 'present';
  const k = keys.user(uid);
  const future = Date.now() + 60_000;
  await redis.hset(k.conns,
    'c1', `${future}|node-a|phone|1`,
    'c2', `${future}|node-a|laptop|1`,
    'c3', `${future}|node-b|tablet|1`,
    'c4', `${Date.now() - 1000}|node-c|old|1`);
  const first = await inbox.append(uid, msgId(0x77), MsgKind.user);
  assert.deepEqual([...first.nodes].sort(), ['node-a', 'node-b']);
  // A retry's duplicate may be the only one left to notify (the first reply was lost).
  const again = await inbox.append(uid, msgId(0x77), MsgKind.user);
  assert.equal(again.duplicate, true);
  assert.deepEqual([...again.nodes].sort(), ['node-a', 'node-b']);

  // An entry expiring at the append's now has expired (as presence counts it); one a ms later has not.
  const at = Date.now();
  const frozen = new Inbox(redis, { prefix: 'px:', cap: 10_000, now: () => at });
  await redis.hset(keys.conns('present-edge'), 'c1', `${at}|node-at|phone|1`, 'c2', `${at + 1}|node-after|laptop|1`);
  assert.deepEqual((await frozen.append('present-edge', msgId(0x78), MsgKind.user)).nodes, ['node-after']);
});

test('a retried append after the meta hash alone was lost stores the new epoch it answers: later appends and reads keep it', async () => {
  const uid = 'meta-lost-retry';
  const k = keys.user(uid);
  const first = await inbox.append(uid, msgId(0x500), MsgKind.user);
  // Redis lost the meta hash only; the ids set still holds the MsgID, so the retry is a duplicate.
  await redis.del(k.meta);
  const retry = await inbox.append(uid, msgId(0x500), MsgKind.user);
  assert.equal(retry.duplicate, true);
  assert.equal(retry.seq, first.seq);
  assert.notEqual(retry.epoch, first.epoch, 'a lost meta hash means a new epoch');
  // The epoch the retry answered is the inbox's from now on: a client told it is not reset again.
  assert.equal(await redis.hget(k.meta, 'epoch'), retry.epoch);
  const expiresAt = await redis.pexpiretime(k.meta);
  assert.ok(expiresAt > Date.now(), `the new meta hash expires (PEXPIRETIME ${expiresAt})`);
  assert.equal(await redis.pexpiretime(k.inbox), expiresAt, 'with the inbox');
  assert.equal((await inbox.range(uid, 0, 10)).epoch, retry.epoch);
  const next = await inbox.append(uid, msgId(0x501), MsgKind.user);
  assert.equal(next.epoch, retry.epoch, 'the next append keeps the epoch the retry answered');
  assert.equal(next.seq, first.seq + 1);
});

test('a new epoch drops the ack cursors of the lost inbox; an existing epoch keeps them', async () => {
  const uid = 'recreated';
  const k = keys.user(uid);
  await appendMany(inbox, uid, 5);
  await inbox.ack(uid, 'phone', 5);
  await inbox.append(uid, msgId(0x600), MsgKind.user);
  assert.deepEqual(await inbox.cursors(uid), { phone: 5 }, 'appends to a live inbox keep cursors');
  // Redis lost the meta hash (and the stream), as after a restore from an older snapshot.
  await redis.del(k.meta, k.inbox, k.ids);
  const fresh = await inbox.append(uid, msgId(0x601), MsgKind.user);
  assert.equal(fresh.seq, 1);
  assert.deepEqual(await inbox.cursors(uid), {}, 'cursors of the old epoch are gone');
});

test('an ack made under an epoch that is gone changes no cursor', async () => {
  const uid = 'stale-ack';
  const k = keys.user(uid);
  const first = await inbox.append(uid, msgId(0x700), MsgKind.user);
  assert.equal(await inbox.ack(uid, 'phone', 1, first.epoch), 1);
  await redis.del(k.meta, k.inbox, k.ids);
  const fresh = await inbox.append(uid, msgId(0x701), MsgKind.user);
  assert.notEqual(fresh.epoch, first.epoch);
  // An ack of seq 50 held from the old inbox arrives late: refused.
  assert.equal(await inbox.ack(uid, 'phone', 50, first.epoch), null);
  assert.deepEqual(await inbox.cursors(uid), {});
  // The same ack under the current epoch counts.
  assert.equal(await inbox.ack(uid, 'phone', 1, fresh.epoch), 1);
});

test('rotateEpoch gives the inbox a new epoch and keeps its ack cursors with the old one, only while it still has the one given; seqs go on', async () => {
  const [, second] = await appendMany(inbox, 'rota', 2, 700);
  const first = await inbox.range('rota', 0, 10);
  const old = first.epoch as string;
  await inbox.ack('rota', 'phone', 2, old);
  const fresh = await inbox.rotateEpoch('rota', old);
  assert.ok(fresh !== null && fresh !== old, `a new epoch, got ${fresh}`);
  const page = await inbox.range('rota', 0, 10);
  assert.equal(page.epoch, fresh);
  assert.deepEqual(page.entries.map((e) => e.seq), [1, 2], 'the entries stay');
  assert.deepEqual(await inbox.cursors('rota'), {}, 'cursors of the old epoch leave the acks hash');
  assert.deepEqual(await inbox.deviceCursor('rota', 'phone'), { seq: 2, epoch: old }, 'kept with the epoch they count in');
  // Another node asking with the old epoch changes nothing and learns the new one.
  assert.equal(await inbox.rotateEpoch('rota', old), fresh);
  assert.equal((await inbox.range('rota', 0, 1)).epoch, fresh);
  // Seqs go on under the new epoch.
  const next = await inbox.append('rota', msgId(703), MsgKind.user);
  assert.deepEqual([next.seq, next.epoch], [(second ?? 0) + 1, fresh]);
  // No inbox: nothing to rotate.
  assert.equal(await inbox.rotateEpoch('rota-none', 'whatever'), null);
  await assert.rejects(inbox.rotateEpoch('rota', ''), (err: unknown) => isPixiuError(err, 'INVALID_REQUEST'));
});

test('a rotation asked for with a cool-down (a resume claim) is refused while another such one is younger than it, on any node; one without (proved by deliveries) never is', async () => {
  await appendMany(inbox, 'rotc', 2, 720);
  const e0 = (await inbox.range('rotc', 0, 1)).epoch as string;
  const e1 = await inbox.rotateEpoch('rotc', e0, 60_000);
  assert.ok(e1 !== null && e1 !== e0, 'the first one is made');
  await inbox.ack('rotc', 'phone', 2, e1);
  // A second claim within the cool-down: the epoch and the cursors stay; the answer is the epoch asked about.
  assert.equal(await inbox.rotateEpoch('rotc', e1, 60_000), e1);
  assert.equal((await inbox.range('rotc', 0, 1)).epoch, e1);
  assert.deepEqual(await inbox.cursors('rotc'), { phone: 2 }, 'a refused rotation drops no cursor');
  // Proved by the node's deliveries: made whatever the cool-down, and it does not start one.
  const e2 = await inbox.rotateEpoch('rotc', e1);
  assert.ok(e2 !== null && e2 !== e1);
  assert.equal(await inbox.rotateEpoch('rotc', e2, 60_000), e2, 'still refused: the last resume rotation is younger than the cool-down');
  // Once the last one is older than the cool-down (here: its time moved back 61 s), the next is made.
  const meta = keys.meta('rotc');
  const at = Number(await redis.hget(meta, 'resume_rotated'));
  await redis.hset(meta, 'resume_rotated', String(at - 61_000));
  const e3 = await inbox.rotateEpoch('rotc', e2, 60_000);
  assert.ok(e3 !== null && e3 !== e2, 'made after the cool-down');
  assert.ok(Number(await redis.hget(meta, 'resume_rotated')) >= at, 'and it starts a new one');
  // A time in the future (Redis's clock stepped back) counts as lapsed.
  await redis.hset(meta, 'resume_rotated', String(Date.now() + 3_600_000));
  const e4 = await inbox.rotateEpoch('rotc', e3 as string, 60_000);
  assert.ok(e4 !== null && e4 !== e3);
  await assert.rejects(inbox.rotateEpoch('rotc', e4 as string, 1.5), (err: unknown) => isPixiuError(err, 'INVALID_REQUEST'));
  await assert.rejects(inbox.rotateEpoch('rotc', e4 as string, -1), (err: unknown) => isPixiuError(err, 'INVALID_REQUEST'));
});
