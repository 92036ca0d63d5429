/**
 * Edges of the Inbox (src/inbox/inbox.ts, lua/append-13.lua, DESIGN.md §4) that
 * inbox.test.ts leaves open: room entries are trimmed to the cap like any other, a
 * message to many (`appendEach`) stores its room and judges presence by the configured
 * clock, every kind round-trips, the largest accepted settings are accepted, a stored
 * entry that is no append's is read as malformed (a gap for readers) and logged once,
 * and an error reply saying Redis cannot write
 * now (READONLY) breaks the flow where one about the user's keys (WRONGTYPE) does not,
 * and `locate` finds a MsgID only while its entry is in the stream (trimmed, deleted by
 * hand or never appended: null), and `range` gives the stream's newest entry beside its
 * page. A private redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { fileRedis } from '../harness/file-redis.js';
import type { RedisServer } from '../harness/redis-server.js';
import { createRedis, redisCall } from '../../src/redis/client.js';
import { isPixiuError } from '../../src/errors.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox, MAX_DEVICE_CURSORS, MAX_INBOX_CAP, MAX_RANGE_LIMIT } from '../../src/inbox/inbox.js';
import { LONGEST_CONTENT_MS } from '../../src/inbox/codec.js';
import { INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { evalScript } from '../../src/redis/scripts.js';
import { Keys } from '../../src/redis/keys.js';

let server: RedisServer;
let redis: Redis;
let inbox: Inbox;
const keys = new Keys('px:');

fileRedis(async (ctx) => {
  server = ctx.redis;
  ({ inbox, redis } = await openInbox(ctx.cleanup, server.url));
});

/** The n-th test MsgID of a kind. */
function msgId(n: number, kind: MsgKind = MsgKind.user): string {
  return encodeMsgId({ partition: 0, kind, counter: n });
}

/** The value of a fulfilled settled result; fails the test on a rejected one. */
function fulfilled<T>(r: PromiseSettledResult<T> | undefined): T {
  assert.ok(r?.status === 'fulfilled', `rejected: ${String((r as PromiseRejectedResult | undefined)?.reason)}`);
  return r.value;
}

test('room entries are trimmed to exactly the cap, as user entries are', async () => {
  const small = new Inbox(redis, { prefix: 'px:', cap: 3 });
  const uid = 'room-capped';
  for (let n = 1; n <= 7; n++) await small.append(uid, msgId(n, MsgKind.room), MsgKind.room, { room: 'r1' });
  const page = await small.range(uid, 0, 100);
  assert.deepEqual([page.firstSeq, page.latestSeq, page.entries.map((e) => e.seq)], [5, 7, [5, 6, 7]]);
  assert.equal(await redis.xlen(keys.inbox(uid)), 3);
  assert.equal(await redis.zcard(keys.ids(uid)), 3);
});

test('appendEach stores the room with each entry, and judges presence by the inbox\'s clock, not the process\'s', async () => {
  const [r] = await inbox.appendEach(['each-room'], msgId(1, MsgKind.room), MsgKind.room, { room: 'team' });
  assert.equal(fulfilled(r).seq, 1);
  assert.deepEqual((await inbox.range('each-room', 0, 10)).entries, [{ seq: 1, id: msgId(1, MsgKind.room), kind: MsgKind.room, room: 'team' }]);

  // Redis's clock (the inbox's `now`) a minute behind this process's: an entry that
  // expires 30 s from Redis's now is live, though past by Date.now.
  const at = Date.now() - 60_000;
  const behind = new Inbox(redis, { prefix: 'px:', cap: 10_000, now: () => at });
  await redis.hset(keys.conns('each-present'), 'c1', `${at + 30_000}|node-a|phone|1`);
  const [one] = await behind.appendEach(['each-present'], msgId(2), MsgKind.user);
  assert.deepEqual(fulfilled(one).nodes, ['node-a']);
  assert.deepEqual((await behind.append('each-present', msgId(3), MsgKind.user)).nodes, ['node-a']);
});

test('every kind (user, room, broadcast, channel) is appended and read back as given', async () => {
  const uid = 'kinds';
  for (const kind of [MsgKind.user, MsgKind.room, MsgKind.broadcast, MsgKind.channel]) {
    await inbox.append(uid, msgId(10 + kind, kind), kind);
  }
  const { entries } = await inbox.range(uid, 0, 10);
  assert.deepEqual(entries.map((e) => [e.seq, e.malformed === true ? undefined : e.kind, e.id]), [
    [1, MsgKind.user, msgId(11, MsgKind.user)],
    [2, MsgKind.room, msgId(12, MsgKind.room)],
    [3, MsgKind.broadcast, msgId(13, MsgKind.broadcast)],
    [4, MsgKind.channel, msgId(14, MsgKind.channel)],
  ]);
});

test('the largest cap, device cursors, retention grace and range limit are accepted, one more cap or device cursor refused', async () => {
  const widest = new Inbox(redis, {
    prefix: 'px:', cap: MAX_INBOX_CAP, deviceCursors: MAX_DEVICE_CURSORS, retentionGraceMs: LONGEST_CONTENT_MS,
  });
  await widest.append('widest', msgId(1), MsgKind.user);
  const page = await widest.range('widest', 0, MAX_RANGE_LIMIT);
  assert.deepEqual(page.entries.map((e) => e.seq), [1]);
  assert.throws(() => new Inbox(redis, { prefix: 'px:', cap: MAX_INBOX_CAP + 1 }), (err) => isPixiuError(err, 'INVALID_REQUEST'));
  assert.throws(() => new Inbox(redis, { prefix: 'px:', cap: 10, deviceCursors: MAX_DEVICE_CURSORS + 1 }), (err) => isPixiuError(err, 'INVALID_REQUEST'));
});

test('a stored entry that is not what the append script writes is read as a malformed entry at its seq, logged once at warn; one whose seq cannot be read is left out', async () => {
  const { logger, lines } = capturingLogger();
  const watched = new Inbox(redis, { prefix: 'px:', cap: 10_000, logger });
  const uid = 'malformed-entry';
  await watched.append(uid, msgId(1), MsgKind.user);
  await redis.xadd(keys.inbox(uid), '2-0', 'id', 'NOT-A-MSG-ID', 'kind', '1');
  // A well-formed MsgID of no kind there is (delivery would name none).
  await redis.xadd(keys.inbox(uid), '3-0', 'id', msgId(3), 'kind', '9');
  // A well-formed entry at a stream ID the script never writes (<seq>-<n>, n > 0).
  await redis.xadd(keys.inbox(uid), '3-1', 'id', msgId(4), 'kind', '1');
  assert.equal((await watched.append(uid, msgId(5), MsgKind.user)).seq, 4);
  const malformed = (seq: number) => ({ seq, id: '', malformed: true });
  const expected = [{ seq: 1, id: msgId(1), kind: MsgKind.user }, malformed(2), malformed(3), malformed(3), { seq: 4, id: msgId(5), kind: MsgKind.user }];
  assert.deepEqual((await watched.range(uid, 0, 10)).entries, expected);
  // Read again, and a page at a time: no second line for an entry.
  assert.deepEqual((await watched.range(uid, 0, 10)).entries, expected);
  assert.deepEqual((await watched.range(uid, 1, 1)).entries, [malformed(2)]);
  const warned = (user: string) => lines.filter((l) => l.user === user).map((l) => [l.level, l.entryId]);
  assert.deepEqual(warned(uid), [[40, '2-0'], [40, '3-0'], [40, '3-1']]);
  assert.match(String(lines[0]?.msg), /gap \(reason undeliverable\)/);

  // Below every seq (0-1): seq 0, which every reader has passed already.
  const zero = 'malformed-zero';
  await redis.xadd(keys.inbox(zero), '0-1', 'id', msgId(1), 'kind', '1');
  assert.equal((await watched.append(zero, msgId(2), MsgKind.user)).seq, 1);
  assert.deepEqual((await watched.range(zero, 0, 10)).entries, [malformed(0), { seq: 1, id: msgId(2), kind: MsgKind.user }]);

  // Beyond any seq (2^53 + 1): no seq can be read, so it is left out, logged once.
  const huge = 'malformed-huge';
  await watched.append(huge, msgId(1), MsgKind.user);
  await redis.xadd(keys.inbox(huge), '9007199254740993-0', 'id', msgId(2), 'kind', '1');
  assert.deepEqual((await watched.range(huge, 0, 10)).entries.map((e) => e.seq), [1]);
  await watched.range(huge, 0, 10);
  assert.deepEqual(warned(huge), [[40, '9007199254740993-0']]);
  assert.match(String(lines.at(-1)?.msg), /skipped/);
});

test('range gives the stream\'s newest entry beside the page whatever after_seq is (range-3.lua): with its room, the one below after its top was deleted by hand, none when it is malformed or the stream is empty', async () => {
  const uid = 'newest-entry';
  await inbox.append(uid, msgId(1), MsgKind.user);
  await inbox.append(uid, msgId(2, MsgKind.room), MsgKind.room, { room: 'r-1' });
  const second = { seq: 2, id: msgId(2, MsgKind.room), kind: MsgKind.room, room: 'r-1' };
  assert.deepEqual((await inbox.range(uid, 0, 1)).newest, second, 'a page that stops before it');
  assert.deepEqual((await inbox.range(uid, 2, 10)).newest, second, 'a page after it: no entries');
  await inbox.append(uid, msgId(3), MsgKind.user);
  await redis.xdel(keys.inbox(uid), '3-0');
  const page = await inbox.range(uid, 0, 10);
  assert.equal(page.latestSeq, 3, 'the counter still says 3');
  assert.deepEqual(page.newest, second, 'the newest entry the stream holds');
  // A malformed newest entry (an operator's XADD) names no message: none.
  await redis.xadd(keys.inbox(uid), '4-0', 'id', 'NOT-A-MSG-ID', 'kind', '1');
  assert.equal((await inbox.range(uid, 0, 10)).newest, undefined);
  await redis.xadd(keys.inbox(uid), '4-1', 'id', msgId(5), 'kind', '1');
  assert.equal((await inbox.range(uid, 4, 10)).newest, undefined, 'nor one at a stream ID the script never writes');
  // The stream gone, the meta hash kept.
  await redis.del(keys.inbox(uid));
  const empty = await inbox.range(uid, 0, 10);
  assert.deepEqual([empty.latestSeq, empty.newest], [3, undefined]);
  assert.equal(Object.hasOwn(await inbox.range('newest-none', 0, 10), 'newest'), false, 'no inbox: none');
});

test('expiresAt is null for a user with no inbox and for an inbox whose keys do not expire, else the meta hash\'s expiry', async () => {
  assert.equal(await inbox.expiresAt('never-appended'), null, 'no inbox (PEXPIRETIME -2)');
  // An inbox no append since append-7 has touched: its keys have no expiry (PEXPIRETIME -1).
  await redis.hset(keys.meta('kept-for-good'), 'epoch', 'old-epoch-00', 'seq', '1');
  assert.equal(await inbox.expiresAt('kept-for-good'), null);
  const expiresAt = Date.now() + 3_600_000;
  await inbox.append('retained-at', msgId(1), MsgKind.user, { expiresAt });
  assert.equal(await inbox.expiresAt('retained-at'), await redis.pexpiretime(keys.meta('retained-at')));
  assert.ok((await inbox.expiresAt('retained-at') ?? 0) > expiresAt);
});

test('a kind that is none of the four rejects the append, and the whole appendEach, before anything is queued', async () => {
  const bad = 9 as MsgKind;
  await assert.rejects(inbox.append('bad-kind', msgId(1), bad), (err) => isPixiuError(err, 'INVALID_REQUEST'));
  // Rejected as a call, not settled per recipient: the caller learns it once.
  await assert.rejects(inbox.appendEach(['bad-kind', 'bad-kind-2'], msgId(1), bad), (err) => isPixiuError(err, 'INVALID_REQUEST'));
  assert.equal(await redis.exists(keys.inbox('bad-kind'), keys.inbox('bad-kind-2')), 0, 'nothing appended');
});

test('the scripts hold their own arguments to the bounds their headers give, whoever calls them: nothing is written', async () => {
  const k = keys.user('script-bounds');
  const invalid = (err: unknown): boolean => isPixiuError(err, 'INVALID_REQUEST');
  const call = <T>(fn: () => Promise<T>): Promise<T> => redisCall(fn);
  // the append script: a MsgID of 16 hex digits exactly (17 or 15 are refused).
  const append = (id: string) => call(() => evalScript(redis, INBOX_SCRIPTS.append, [k.inbox, k.meta, k.ids, k.conns, k.acks], [id, '1', '10', 'e', '0', '', '0', '0', '0']));
  await assert.rejects(append(`${msgId(1)}0`), invalid, 'a 17-digit MsgID');
  await assert.rejects(append(msgId(1).slice(1)), invalid, 'a 15-digit MsgID');
  const appendArgs = [msgId(1), '1', '10', 'e', '0', '', '0', '0', '0', ''];
  const appendMost = (most: string[]) => call(() => evalScript(redis, INBOX_SCRIPTS.append, [k.inbox, k.meta, k.ids, k.conns, k.acks], [...appendArgs, ...most]));
  await assert.rejects(appendMost([]), invalid, 'append-10 arguments (no most devices)');
  await assert.rejects(appendMost(['0']), invalid, 'most devices 0');
  await assert.rejects(appendMost(['1000000000']), invalid, 'a 10-digit most devices');
  // ack-7: a seq at most 2^53 - 1; a most-devices of at most 9 digits.
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.ack, [k.acks, k.meta], ['phone', '9007199254740992', '', '100'])), invalid, 'seq 2^53');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.ack, [k.acks, k.meta], ['phone', '1', '', '1000000000'])), invalid, 'a 10-digit most devices');
  // range-3: an after seq of at most 16 digits, a limit of at most 9.
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.range, [k.inbox, k.meta], ['12345678901234567', '10'])), invalid, 'a 17-digit after seq');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.range, [k.inbox, k.meta], ['0', '1000000000'])), invalid, 'a 10-digit limit');
  // rotate-7: two different epochs; a cool-down of whole ms >= 0; a generation of at most 15 digits; a latest seq read of digits or none.
  await redis.hset(k.meta, 'epoch', 'same-epoch-0');
  await redis.hset(k.acks, 'phone', '1');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'same-epoch-0', '0', '0'])), invalid, 'the same epoch twice');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'other-epoch-0', '-1', '0'])), invalid, 'a negative cool-down');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'other-epoch-0', 'soon', '0'])), invalid, 'a cool-down that is no number');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'other-epoch-0', '0', '1234567890123456'])), invalid, 'a 16-digit generation');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'other-epoch-0', '0', '0', ''])), invalid, 'rotate-6 arguments (no most devices)');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'other-epoch-0', '0', '0', '', '0'])), invalid, 'most devices 0');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'other-epoch-0', '0'])), invalid, 'no generation');
  await assert.rejects(call(() => evalScript(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['same-epoch-0', 'other-epoch-0', '0', '0', '-1'])), invalid, 'a negative latest seq read');
  assert.equal(await redis.hget(k.acks, 'phone'), '1', 'the cursors are kept');
  assert.equal(await redis.hget(k.meta, 'epoch'), 'same-epoch-0', 'the epoch is kept');
  assert.equal(await redis.exists(k.inbox, k.ids), 0, 'nothing appended');
});

test('an append refused READONLY (a failover) breaks its flow: the flow\'s later appends fail unsent; WRONGTYPE does not', async (t) => {
  const own = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  t.after(() => own.disconnect());
  const target = new Inbox(own, { prefix: 'px:', cap: 10_000 });
  await target.append('ro-warm', msgId(1), MsgKind.user); // the script loaded: the refusal is READONLY, not NOSCRIPT

  // WRONGTYPE is about the user's keys: its flow goes on.
  const typed = {};
  await redis.set(keys.inbox('wrong-type'), 'x');
  await assert.rejects(target.append('wrong-type', msgId(1), MsgKind.user, undefined, typed));
  assert.equal((await target.append('ro-after', msgId(1), MsgKind.user, undefined, typed)).seq, 1);

  const flow = {};
  await redis.call('REPLICAOF', '127.0.0.1', '1');
  try {
    await assert.rejects(target.append('ro-user', msgId(2), MsgKind.user, undefined, flow), (err) => isPixiuError(err, 'UNAVAILABLE'));
  } finally {
    await redis.call('REPLICAOF', 'NO', 'ONE');
  }
  // Redis takes writes again, but nothing later of that request may go on.
  await assert.rejects(target.append('ro-user', msgId(3), MsgKind.user, undefined, flow), (err) => isPixiuError(err, 'UNAVAILABLE'));
  assert.equal(await redis.exists(keys.inbox('ro-user')), 0, 'the broken flow\'s append was not sent');
  assert.equal((await target.append('ro-user', msgId(4), MsgKind.user, undefined, {})).seq, 1, 'another flow goes on');
});

test('locate gives a MsgID\'s seq while its entry is in the stream, and null once trimmed, deleted by hand (XDEL), never appended, or when the entry at its seq names another', async () => {
  const small = new Inbox(redis, { prefix: 'px:', cap: 3 });
  const uid = 'located';
  for (let n = 1; n <= 5; n++) await small.append(uid, msgId(n), MsgKind.user);
  await small.ack(uid, 'phone', 4);
  const seqOf = async (id: string): Promise<number | null> => (await small.locate(uid, id)).seq;
  assert.deepEqual(await small.locate(uid, msgId(4)), { seq: 4, cursors: { phone: 4 } });
  assert.equal(await seqOf(msgId(1)), null, 'trimmed by the cap');
  assert.equal(await redis.xdel(keys.inbox(uid), '4-0'), 1);
  assert.deepEqual(await small.locate(uid, msgId(4)), { seq: null, cursors: { phone: 4 } }, 'deleted by hand, its cursors still read');
  assert.equal(await seqOf(msgId(9)), null, 'never appended');
  // An ids set that disagrees with the stream (restored apart, edited by hand): the entry decides.
  await redis.zadd(keys.ids(uid), 5, msgId(8));
  assert.equal(await seqOf(msgId(8)), null, 'seq 5 is another MsgID\'s');
  assert.equal(await seqOf(msgId(5)), 5);
  await assert.rejects(redisCall(() => evalScript(redis, INBOX_SCRIPTS.locate, [keys.ids(uid), keys.inbox(uid)], ['XYZ'])), (err: unknown) => isPixiuError(err, 'INVALID_REQUEST'));
});
