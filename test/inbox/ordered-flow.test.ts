/**
 * The appends of an ordered flow (a batch's: `Inbox.orderedFlow`, src/inbox/append-chain.ts)
 * land per user in the order made, or stop at the first that did not: `append-13.lua`
 * refuses, writing nothing, an append whose earlier one (ARGV[10]) is not in the inbox.
 * The end-to-end case (Redis answering BUSY to some appends of a batch and running the
 * next): test/api/batch-order-refusals.test.ts. Here: the script's precondition, and its
 * edge — an earlier append answered as done and trimmed away since by the cap (other
 * requests' appends) is not asked for, so it refuses nothing. A private redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { monitorRedis } from '../harness/redis-monitor.js';
import { isRedisFailure, redisCall } from '../../src/redis/client.js';
import { isPixiuError } from '../../src/errors.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { evalScript } from '../../src/redis/scripts.js';
import { Keys } from '../../src/redis/keys.js';

let redis: Redis;
let url: string;
const keys = new Keys('px:');

fileRedis(async (ctx) => {
  url = ctx.redis.url;
  ({ redis } = await openInbox(ctx.cleanup, url));
});

/** The n-th test MsgID. */
function msgId(n: number): string {
  return encodeMsgId({ partition: 0, kind: MsgKind.user, counter: n });
}

/** `append-13.lua` for `uid`, cap 10, generation 0, with `earlier` as ARGV[10] ("" when undefined, as callers without a batch send), 100 device cursors; answers the seq. */
async function append(uid: string, id: string, earlier?: string): Promise<number> {
  const k = keys.user(uid);
  const argv = [id, '1', '10', 'epoch-1', String(Date.now()), '', String(Date.now() + 60_000), '1000', '0', earlier ?? '', '100'];
  const [seq] = await redisCall(() => evalScript<[number]>(redis, INBOX_SCRIPTS.append, [k.inbox, k.meta, k.ids, k.conns, k.acks], argv));
  return seq;
}

/** Everything stored under `uid`'s inbox keys, to compare before and after a refusal. */
async function snapshot(uid: string): Promise<unknown> {
  const k = keys.user(uid);
  return {
    inbox: await redis.xrange(k.inbox, '-', '+'),
    meta: await redis.hgetall(k.meta),
    ids: await redis.zrange(k.ids, '0', '-1', 'WITHSCORES'),
    ttl: await redis.pexpiretime(k.meta),
  };
}

test('the append script refuses, writing nothing, an append whose earlier MsgID is not in the inbox (503, a Redis failure, saying why); appends it once the earlier one is there; a duplicate is answered as one whatever the earlier', async () => {
  const earlierMissing = (err: unknown): boolean => isPixiuError(err, 'UNAVAILABLE') && isRedisFailure(err)
    && /an earlier message of this batch to the same user was not appended/.test(err.message);
  // No inbox yet: nothing is created, not even the epoch.
  await assert.rejects(append('chained', msgId(2), msgId(1)), earlierMissing);
  const k = keys.user('chained');
  assert.equal(await redis.exists(k.inbox, k.meta, k.ids, k.acks), 0, 'no key written');
  assert.equal(await append('chained', msgId(1), ''), 1, '"" names none');
  assert.equal(await append('chained', msgId(2), msgId(1)), 2, 'the earlier one is there');
  // An inbox with entries: refused as it stands.
  const before = await snapshot('chained');
  await assert.rejects(append('chained', msgId(4), msgId(3)), earlierMissing);
  assert.deepEqual(await snapshot('chained'), before, 'nothing written');
  // A MsgID already there is a duplicate, whether or not the earlier one is.
  assert.equal(await append('chained', msgId(2), msgId(3)), 2);
  assert.equal(await append('chained', msgId(2), msgId(2)), 2, 'an item repeating its earlier one (one client_msg_id)');
  // An empty ARGV[10] (every caller without a batch sends it so): no precondition.
  assert.equal(await append('chained', msgId(3)), 3);
  await assert.rejects(append('chained', msgId(4), 'NOT-A-MSG-ID'), (err) => isPixiuError(err, 'INVALID_REQUEST'));
  await assert.rejects(append('chained', msgId(4), msgId(1).slice(1)), (err) => isPixiuError(err, 'INVALID_REQUEST'));
  assert.equal(await redis.xlen(keys.inbox('chained')), 3);
});

test('an ordered flow names only an earlier append still without an answer: one answered as done and trimmed away since (cap 1, another request\'s append) does not refuse the next', async (t) => {
  const { redis: client } = await openInbox(t, url);
  const small = new Inbox(client, { prefix: 'px:', cap: 1 });
  const flow = small.orderedFlow();
  assert.equal((await small.append('trimmed', msgId(1), MsgKind.user, undefined, flow)).seq, 1);
  // Another request's append to the user: with a cap of 1, item 1's entry (and its id) is trimmed away.
  assert.equal((await small.append('trimmed', msgId(9), MsgKind.user)).seq, 2);
  assert.equal(await redis.zscore(keys.ids('trimmed'), msgId(1)), null, 'the earlier append is no longer in the inbox');
  assert.equal((await small.append('trimmed', msgId(2), MsgKind.user, undefined, flow)).seq, 3, 'the flow\'s next append lands');
  // The same through appendEach (a message to many), and for several users at once.
  const each = await small.appendEach(['trimmed', 'other'], msgId(3), MsgKind.user, undefined, flow);
  assert.deepEqual(each.map((r) => (r.status === 'fulfilled' ? r.value.seq : r.reason)), [4, 1]);
  await small.append('other', msgId(8), MsgKind.user);
  const next = await small.appendEach(['other', 'trimmed'], msgId(4), MsgKind.user, undefined, flow);
  assert.deepEqual(next.map((r) => (r.status === 'fulfilled' ? r.value.seq : r.reason)), [3, 5]);
});

test('an ordered flow: appends to one user sent together name each the one before; to other users, none', async (t) => {
  const { redis: client } = await openInbox(t, url);
  const inbox = new Inbox(client, { prefix: 'px:', cap: 10 });
  const flow = inbox.orderedFlow();
  // What goes out: MONITOR on another connection reads every command as Redis runs it.
  const sent: string[][] = [];
  await monitorRedis(url, t, (args) => {
    if (args[0]?.toLowerCase() === 'evalsha' && /\{(?:together|apart)\}/.test(args[3] ?? '')) sent.push([...args]);
  });
  const appends = [
    inbox.append('together', msgId(1), MsgKind.user, undefined, flow),
    inbox.appendEach(['apart', 'together'], msgId(2), MsgKind.user, undefined, flow),
    inbox.append('together', msgId(3), MsgKind.user, undefined, flow),
  ];
  await Promise.all(appends);
  await waitUntil('MONITOR shows the four appends', async () => sent.length === 4, 5000, 5);
  // EVALSHA sha numkeys, 5 keys, then ARGV: ARGV[1] (the MsgID) at 8, ARGV[10] (the earlier one) at 17.
  const earlierOf = sent.map((args) => [args[3]?.includes('{together}') === true ? 'together' : 'apart', args[8], args[17]]);
  assert.deepEqual(earlierOf, [
    ['together', msgId(1), ''],
    ['apart', msgId(2), ''],
    ['together', msgId(2), msgId(1)],
    ['together', msgId(3), msgId(2)],
  ]);
});
