/**
 * An inbox entry's `exp`, the instant its message's record expires (append-13.lua
 * ARGV[12], codec.ts `toEntry`, src/delivery/entry-records.ts; a black-box tester's
 * finding F6, walk21): written when the caller gives the content's expiry, read back
 * as `InboxEntry.exp`, and an entry whose `exp` passed is expired without a store
 * read. Real Redis for the script; the reader and the parser alone below.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { isPixiuError, PixiuError } from '../../src/errors.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { toEntry, type PageEntry } from '../../src/inbox/codec.js';
import { expiredByEntry, readEntryRecords } from '../../src/delivery/entry-records.js';
import { INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { redisCall } from '../../src/redis/client.js';
import { evalScript } from '../../src/redis/scripts.js';
import { Keys } from '../../src/redis/keys.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { ReadRecord } from '../../src/store/unreadable.js';

let redis: Redis;
let inbox: Inbox;
const keys = new Keys('px:');

fileRedis(async (ctx) => {
  ({ inbox, redis } = await openInbox(ctx.cleanup, ctx.redis.url));
});

/** The n-th test MsgID of a kind. */
function msgId(n: number, kind: MsgKind = MsgKind.user): string {
  return encodeMsgId({ partition: 0, kind, counter: n });
}

test('the append writes the content\'s expiry as the entry\'s `exp` (room entries too, appendEach too) and range reads it back; none when the caller gives none', async () => {
  const at = Date.now() + 60_000;
  await inbox.append('exp-user', msgId(1), MsgKind.user, { expiresAt: at });
  await inbox.append('exp-user', msgId(2), MsgKind.user);
  const [each] = await inbox.appendEach(['exp-room'], msgId(3, MsgKind.room), MsgKind.room, { room: 'r1', expiresAt: at + 1 });
  assert.equal(each?.status, 'fulfilled');
  // The stream as Redis holds it.
  assert.deepEqual(await redis.xrange(keys.inbox('exp-user'), '-', '+'), [
    ['1-0', ['id', msgId(1), 'kind', '1', 'exp', String(at)]],
    ['2-0', ['id', msgId(2), 'kind', '1']],
  ]);
  assert.deepEqual(await redis.xrange(keys.inbox('exp-room'), '-', '+'), [
    ['1-0', ['id', msgId(3, MsgKind.room), 'kind', '2', 'room', 'r1', 'exp', String(at + 1)]],
  ]);
  // And as readers get it.
  assert.deepEqual((await inbox.range('exp-user', 0, 10)).entries, [
    { seq: 1, id: msgId(1), kind: MsgKind.user, exp: at },
    { seq: 2, id: msgId(2), kind: MsgKind.user },
  ]);
  assert.deepEqual((await inbox.range('exp-room', 0, 10)).entries, [
    { seq: 1, id: msgId(3, MsgKind.room), kind: MsgKind.room, room: 'r1', exp: at + 1 },
  ]);
});

test('the append script (append-12 on) holds ARGV[12] to digits (at most 15) or empty, writing nothing otherwise; append-11\'s eleven arguments write an entry without `exp`', async () => {
  const k = keys.user('exp-bounds');
  // now, the keys' content expiry a minute later (a zero one would expire the keys at once).
  const now = Date.now();
  const args = [msgId(1), '1', '10', 'e', String(now), '', String(now + 60_000), '0', '0', '', '100'];
  const append = (exp?: string) => redisCall(() => evalScript(redis, INBOX_SCRIPTS.append, [k.inbox, k.meta, k.ids, k.conns, k.acks], exp === undefined ? args : [...args, exp]));
  const invalid = (err: unknown): boolean => isPixiuError(err, 'INVALID_REQUEST');
  await assert.rejects(append('-1'), invalid, 'a negative exp');
  await assert.rejects(append('1e12'), invalid, 'an exp that is not digits');
  await assert.rejects(append('1234567890123456'), invalid, 'a 16-digit exp');
  assert.equal(await redis.exists(k.inbox, k.ids, k.meta), 0, 'nothing written');
  await append();
  assert.deepEqual(await redis.xrange(k.inbox, '-', '+'), [['1-0', ['id', msgId(1), 'kind', '1']]]);
});

test('toEntry reads `exp` when it is digits; one set by hand that is not is left out, the entry still names its message; fields it does not know are skipped', () => {
  const id = msgId(7);
  assert.deepEqual(toEntry(['3-0', ['id', id, 'kind', '1', 'exp', '1700000000000']]), { seq: 3, id, kind: MsgKind.user, exp: 1_700_000_000_000 });
  assert.deepEqual(toEntry(['3-0', ['id', id, 'kind', '1']]), { seq: 3, id, kind: MsgKind.user });
  for (const bad of ['', 'soon', '-5', '1.5', '1e12', '1234567890123456']) {
    assert.deepEqual(toEntry(['3-0', ['id', id, 'kind', '1', 'exp', bad]]), { seq: 3, id, kind: MsgKind.user }, `exp ${JSON.stringify(bad)}`);
  }
  // A later release's field, as this release's `exp` is to an older one: skipped.
  assert.deepEqual(toEntry(['3-0', ['id', id, 'kind', '2', 'room', 'r', 'exp', '5', 'later', 'x']]), { seq: 3, id, kind: MsgKind.room, room: 'r', exp: 5 });
});

/** A reader that records what it is asked and answers a record per id, or throws UNAVAILABLE (an owner not running). */
function reader(down: boolean): RecordReader & { asked: string[][] } {
  const asked: string[][] = [];
  return {
    isOpen: true,
    asked,
    get: () => Promise.reject(new Error('not used')),
    getMany(ids) {
      asked.push([...ids]);
      if (down) return Promise.reject(new PixiuError('UNAVAILABLE', 'message partition 0 is held by store s, whose lease has lapsed'));
      return Promise.resolve(ids.map((i) => ({ id: i }) as unknown as ReadRecord));
    },
  };
}

test('readEntryRecords does not read an entry whose `exp` is at or before now (null: expired), reads the rest in order, and reads nothing when every entry expired', async () => {
  const now = 1_000_000;
  const e = (seq: number, exp?: number): PageEntry => ({ seq, id: msgId(seq), kind: MsgKind.user, ...(exp === undefined ? {} : { exp }) });
  const entries = [e(1, now - 1), e(2), e(3, now), e(4, now + 1), { seq: 5, id: '', malformed: true } as const];
  assert.deepEqual(entries.map((x) => expiredByEntry(x, now)), [true, false, true, false, false]);

  const up = reader(false);
  const records = await readEntryRecords(up, entries, now);
  assert.deepEqual(up.asked, [[msgId(2), msgId(4), '']]);
  assert.deepEqual(records.map((r) => (r === null ? null : (r as unknown as { id: string }).id)), [null, msgId(2), null, msgId(4), '']);

  // The owner down: expired entries are gaps without it; a live one still fails (UNAVAILABLE, never a gap).
  const down = reader(true);
  assert.deepEqual(await readEntryRecords(down, [e(1, now - 1), e(2, now)], now), [null, null]);
  assert.deepEqual(down.asked, []);
  await assert.rejects(readEntryRecords(down, [e(1, now - 1), e(2, now + 1)], now), (err) => isPixiuError(err, 'UNAVAILABLE'));
  assert.deepEqual(await readEntryRecords(down, [], now), []);
});
