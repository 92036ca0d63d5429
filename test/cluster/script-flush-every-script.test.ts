/**
 * Every script call gets through a `SCRIPT FLUSH` the same way (src/redis/scripts.ts:
 * EVALSHA, and after NOSCRIPT one plain EVAL, `resendOnNoScript`), also while Redis
 * refuses writes (OOM under `noeviction`) with several calls of one script in flight:
 * each refused call names the full Redis, and once Redis takes writes they run.
 *
 * Through the ioredis command `defineCommand` registers, as these scripts were called
 * before, the connection counted as having a script once one EVAL of it was written
 * there, also when Redis refused it (ioredis 6 `Script`): after the flush, calls made
 * together went as EVALSHA again, met NOSCRIPT, and the one further try ioredis makes
 * raced the others' EVALs, so some failed NOSCRIPT for good and were answered "Redis
 * is unavailable" instead of naming the cause. A private redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { fileRedis } from '../harness/file-redis.js';
import { FULL, fullAfterFlush, refusals } from '../harness/script-flush.js';
import { createRedis, redisCall } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { evalScript, scriptSha } from '../../src/redis/scripts.js';
import { INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { Rooms } from '../../src/rooms/membership.js';
import { Presence } from '../../src/cluster/presence.js';
import { ChannelStream } from '../../src/channels/channel-stream.js';
import { BROADCAST_SCRIPTS, BroadcastStream } from '../../src/broadcast/broadcast-stream.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { ClientIdClaims } from '../../src/cluster/client-id-claims.js';
import { deleteIf } from '../../src/redis/delete-if.js';

/** Calls made in one tick: enough that, through the registered commands, some lost the race every run. */
const TOGETHER = 8;

let redis: Redis;
let admin: Redis;

fileRedis(async ({ redis: server, cleanup }) => {
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  cleanup.after(() => redis.disconnect());
  admin = await createRedis({ url: server.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  cleanup.after(() => admin.disconnect());
});

/** `n` calls of `call`, made in one tick, settled. */
function together<T>(n: number, call: (i: number) => Promise<T>): Promise<PromiseSettledResult<T>[]> {
  return Promise.allSettled(Array.from({ length: n }, (_, i) => call(i)));
}

/** The values of `settled`, asserting every call succeeded. */
function values<T>(settled: PromiseSettledResult<T>[]): T[] {
  return settled.map((s) => {
    if (s.status === 'rejected') throw new assert.AssertionError({ message: `a call failed: ${String(s.reason)}` });
    return s.value;
  });
}

/**
 * Asserts that `call`, made once and then {@link TOGETHER} times at once after a SCRIPT
 * FLUSH on a full Redis, is refused naming the full Redis every time; then, once Redis
 * takes writes, that calls made together after another SCRIPT FLUSH all run.
 * @returns what those last calls answered
 */
async function refusedWhileFullThenRun<T>(call: (i: number) => Promise<T>): Promise<T[]> {
  const restore = await fullAfterFlush(admin);
  try {
    assert.deepEqual(refusals(await together(1, call)), [FULL]);
    assert.deepEqual(refusals(await together(TOGETHER, (i) => call(i + 1))), Array<string>(TOGETHER).fill(FULL));
  } finally {
    await restore();
  }
  await admin.script('FLUSH');
  return values(await together(TOGETHER, (i) => call(TOGETHER + 1 + i)));
}

/**
 * Runs {@link TOGETHER} calls of `call` made at once after a SCRIPT FLUSH on a full
 * Redis, for the scripts that run then (`no-writes`, `allow-oom`), asserting each
 * succeeded.
 * @returns what they answered
 */
async function runWhileFull<T>(call: (i: number) => Promise<T>): Promise<T[]> {
  const restore = await fullAfterFlush(admin);
  try {
    return values(await together(TOGETHER, call));
  } finally {
    await restore();
  }
}

test('evalScript: after SCRIPT FLUSH on a full Redis, calls of a writing script made together are all refused naming the full Redis; once it takes writes they run and load it', async () => {
  const k = new Keys('flush-eval:').user('u');
  const rotate = (i: number): Promise<string> =>
    redisCall(() => evalScript<string>(redis, INBOX_SCRIPTS.rotate, [k.meta, k.acks], ['old-epoch', `new-epoch-${i}`, '0', '0', '', '100']));
  assert.deepEqual(await refusedWhileFullThenRun(rotate), Array<string>(TOGETHER).fill(''), 'no inbox: nothing to rotate');
  assert.deepEqual(await admin.script('EXISTS', scriptSha(INBOX_SCRIPTS.rotate)), [1], 'the EVAL loaded it');
});

test('evalScript refuses a call with as many keys as the script does not take, sending nothing', async () => {
  await assert.rejects(evalScript(redis, INBOX_SCRIPTS.rotate, ['only-one'], ['a', 'b', '0', '0']), /takes 2 keys, not 1/);
});

test('rooms: member adds and room message times made together after SCRIPT FLUSH on a full Redis are all refused naming it; then they run', async () => {
  const rooms = new Rooms(redis, new Keys('flush-rooms:'), 1000);
  const added = await refusedWhileFullThenRun((i) => rooms.add(`room-${i}`, [`user-${i}`]));
  assert.deepEqual(added, Array.from({ length: TOGETHER }, () => ({ added: 1, size: 1 })));
  const times = await refusedWhileFullThenRun((i) => rooms.messageTime(`room-${i}`));
  assert.ok(times.every((ms) => Number.isSafeInteger(ms) && ms > 0), `message times ${times.join(', ')}`);
});

test('presence: adds and refreshes made together after SCRIPT FLUSH on a full Redis are all refused naming it, then run; prunes run while it is full', async (t) => {
  const presence = new Presence(redis, new Keys('flush-presence:'), { node: 'node-a', ttlMs: 60_000, maxPerUser: 10, liveNodes: async (nodes) => new Set(nodes) });
  t.after(() => presence.stop());
  const since = Date.now();
  const added = await refusedWhileFullThenRun((i) => presence.add(`user-${i}`, `conn-${i}`, 'phone', since));
  assert.deepEqual(added, Array.from({ length: TOGETHER }, () => ({ admitted: true, replaced: [] })));
  const refreshed = await refusedWhileFullThenRun((i) => presence.refresh(`user-${i}`, `conn-${i}`, 'phone', since));
  assert.deepEqual(refreshed, Array<string>(TOGETHER).fill('kept'), 'the entries the adds that ran wrote');
  // Those users: each has one entry of node-a, which prune-1 deletes.
  const first = TOGETHER + 1;
  await runWhileFull((i) => presence.removeNode(`user-${first + i}`, 'node-a'));
  for (let i = 0; i < TOGETHER; i++) assert.equal(await redis.exists(new Keys('flush-presence:').conns(`user-${first + i}`)), 0);
});

test('channels and broadcasts: publications made together after SCRIPT FLUSH on a full Redis are all refused naming it, then run; stream bounds are read while it is full, and pages with their bounds after SCRIPT FLUSH', async () => {
  const keys = new Keys('flush-streams:');
  const channels = new ChannelStream(redis, keys, 100, 60_000);
  const published = await refusedWhileFullThenRun((i) => channels.publishOnce(`chan-${i}`, 'note', Date.now(), '{"n":1}', `cmid-${i}`, `fp-${i}`));
  assert.ok(published.every((p) => !p.before), 'each published once');
  const broadcasts = new BroadcastStream(redis, keys, 100);
  const entry = (i: number) => ({
    msgId: encodeMsgId({ partition: 0, kind: MsgKind.broadcast, counter: i + 1 }), type: 'note', ts: Date.now(), dataJson: '{"n":1}', filter: undefined, expiresAt: Date.now() + 60_000,
  });
  const bseqs = await refusedWhileFullThenRun((i) => broadcasts.publish(entry(i)));
  assert.equal(new Set(bseqs).size, TOGETHER);
  const bounds = await runWhileFull(() => broadcasts.bounds());
  assert.ok(bounds.every((b) => b.first === bseqs[0] && b.last === bseqs.at(-1)), JSON.stringify(bounds[0]));
  // A page with its bounds is a MULTI, which a full Redis refuses whatever it holds
  // (queuing in a MULTI may grow memory): after a SCRIPT FLUSH alone. Through the
  // registered command, every such read failed NOSCRIPT (its fallback cannot resend
  // a command inside a transaction).
  await admin.script('FLUSH');
  const pages = values(await together(TOGETHER, () => broadcasts.rangeWithBounds('0-0', 100)));
  assert.ok(pages.every((p) => p.entries.length === TOGETHER && p.bounds.last === bseqs.at(-1)));
  assert.deepEqual(await admin.script('EXISTS', scriptSha(BROADCAST_SCRIPTS.bounds)), [1], 'loaded by the EVAL in the MULTI');
});

test('store claims: minted counters recorded together after SCRIPT FLUSH on a full Redis are all refused naming it, then run; claims run after SCRIPT FLUSH; compare-and-deletes run while it is full', async (t) => {
  const keys = new Keys('flush-claims:');
  const claims = new PartitionClaims(redis, keys);
  await refusedWhileFullThenRun((i) => claims.recordMinted(`store-${i}`, 0, [i + 1]));
  assert.deepEqual(await redis.hgetall(keys.storeMinted(`store-${TOGETHER + 1}`)), { 0: String(TOGETHER + 2) });
  // A claim first sets the claims' age (SET), which a full Redis refuses before the script runs: after SCRIPT FLUSH alone.
  await admin.script('FLUSH');
  const answers = values(await together(TOGETHER, (i) => claims.claim(`store-${i}`, 1, undefined, { dir: `/data/${i}`, host: 'h' })));
  assert.deepEqual(answers.map((a) => a.kind === 'held' && a.base).sort((a, b) => Number(a) - Number(b)), Array.from({ length: TOGETHER }, (_, i) => i));
  for (let i = 0; i < TOGETHER; i++) await redis.set(`flush-claims:lease-${i}`, `node-${i}`);
  assert.deepEqual(await runWhileFull((i) => deleteIf(redis, `flush-claims:lease-${i}`, `node-${i}`)), Array<boolean>(TOGETHER).fill(true));
  // client_msg_id pending marks, dropped by compare-and-delete sent at once (client-id-claims.ts).
  const ids = new ClientIdClaims(redis, keys, 'store-a');
  t.after(() => ids.stop());
  for (let i = 0; i < TOGETHER; i++) assert.deepEqual(await ids.claim(`cmid-${i}`), { state: 'mine' });
  await runWhileFull((i) => ids.release(`cmid-${i}`));
  for (let i = 0; i < TOGETHER; i++) ids.end(`cmid-${i}`);
  assert.equal(await redis.exists(...Array.from({ length: TOGETHER }, (_, i) => keys.clientIdClaim(`cmid-${i}`))), 0, 'every mark dropped');
});

test('inboxes: epoch rotations made together after SCRIPT FLUSH on a full Redis are all refused naming it, then run; acks, page reads and MsgID lookups run while it is full', async () => {
  const inbox = new Inbox(redis, { prefix: 'flush-inbox:', cap: 100 });
  const msgId = encodeMsgId({ partition: 0, kind: MsgKind.user, counter: 1 });
  const epochs: string[] = [];
  for (let i = 0; i < 2 * TOGETHER + 1; i++) epochs.push((await inbox.append(`user-${i}`, msgId, MsgKind.user)).epoch);
  const rotated = await refusedWhileFullThenRun((i) => inbox.rotateEpoch(`user-${i}`, epochs[i] as string));
  assert.ok(rotated.every((epoch, i) => epoch !== null && epoch !== epochs[TOGETHER + 1 + i]), 'each given a new epoch');
  assert.deepEqual(await runWhileFull((i) => inbox.ack(`user-${i}`, 'phone', 1)), Array<number>(TOGETHER).fill(1));
  const pages = await runWhileFull((i) => inbox.range(`user-${i}`, 0, 10));
  assert.ok(pages.every((p) => p.latestSeq === 1 && p.entries[0]?.id === msgId));
  assert.deepEqual(await runWhileFull((i) => inbox.locate(`user-${i}`, msgId)), Array.from({ length: TOGETHER }, () => ({ seq: 1, cursors: { phone: 1 } })));
});
