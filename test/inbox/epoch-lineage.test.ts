/**
 * An epoch's lineage (src/inbox/lineage.ts): a rotation (rotate-7.lua, and append-13.lua's
 * rotation for a higher generation) records which epoch it replaced and the latest seq
 * it goes on from; an epoch created afresh (the keys lost) records none, and a lineage
 * left about another epoch (an older node's script rotated since) is read as none.
 * Delivery marks with it the part of the trimmed gap after a `reset` that a device had.
 * Real Redis (a private redis-server), no mocks.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { openInbox } from '../harness/checks.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { parseLineage } from '../../src/inbox/lineage.js';
import { Keys } from '../../src/redis/keys.js';

const cleanup = cleanupList();
let redis: Redis;
const keys = new Keys('lin:');

before(async () => {
  const server = await RedisServer.start();
  cleanup.after(() => server.destroy());
  ({ redis } = await openInbox(cleanup, server.url, 'lin:'));
});
after(() => cleanup.run());

let counter = 0;
/** Appends `n` messages to `uid`; answers the epoch after the last. */
async function appendMany(inbox: Inbox, uid: string, n: number): Promise<string> {
  let epoch = '';
  for (let i = 0; i < n; i++) epoch = (await inbox.append(uid, encodeMsgId({ partition: 0, kind: MsgKind.user, counter: ++counter }), MsgKind.user)).epoch;
  return epoch;
}

test('a resume claim\'s rotation records the epoch it replaced and the latest seq it goes on from; a second one records its own; one the node proved vouches for no seq', async () => {
  const inbox = new Inbox(redis, { prefix: 'lin:', cap: 5 });
  const uid = 'lena';
  const first = await appendMany(inbox, uid, 12);
  assert.equal(await inbox.lineage(uid), undefined, 'a new inbox goes on from nothing');
  const second = await inbox.rotateEpoch(uid, first, 60_000) as string;
  assert.deepEqual(await inbox.lineage(uid), { epoch: second, replaced: first, through: 12 });
  await appendMany(inbox, uid, 2);
  // Past the claim's cool-down for this test: a second claim would be refused.
  await redis.hdel('lin:{lena}:meta', 'resume_rotated');
  const third = await inbox.rotateEpoch(uid, second, 60_000) as string;
  assert.deepEqual(await inbox.lineage(uid), { epoch: third, replaced: second, through: 14 });
  // A rotation the node's deliveries proved (no cool-down): Redis assigned seqs again, from a seq no one knows.
  await appendMany(inbox, uid, 1);
  const fourth = await inbox.rotateEpoch(uid, third) as string;
  assert.deepEqual(await inbox.lineage(uid), { epoch: fourth, replaced: third, through: 0 });
});

test('an append under a higher generation records the lineage of its rotation (through the seq before it); an inbox created afresh after its keys were lost records none', async () => {
  const gen = { value: 0 };
  const inbox = new Inbox(redis, { prefix: 'lin:', cap: 5, generation: () => gen.value });
  const uid = 'milo';
  const before = await appendMany(inbox, uid, 7);
  gen.value = 1_000;
  const after = await appendMany(inbox, uid, 1);
  assert.notEqual(after, before);
  assert.deepEqual(await inbox.lineage(uid), { epoch: after, replaced: before, through: 7 });

  const k = keys.user(uid);
  await redis.del(k.inbox, k.meta, k.ids, k.acks);
  await appendMany(inbox, uid, 1);
  assert.equal(await inbox.lineage(uid), undefined);
});

test('a lineage about another epoch than the inbox\'s, or malformed, is none', () => {
  assert.equal(parseLineage('B', 'A X 3'), undefined, 'left by a rotation to A, before an older script rotated to B');
  assert.deepEqual(parseLineage('B', 'B A 3'), { epoch: 'B', replaced: 'A', through: 3 });
  for (const raw of ['B A', 'B  3', 'B A -1', 'B A 3 4', 'B A x', null]) assert.equal(parseLineage('B', raw), undefined, String(raw));
  assert.equal(parseLineage(null, 'B A 3'), undefined);
});

test('a resume claim\'s rotation goes on from at most the latest its read found: seqs appended between that read and the rotation are no device\'s (rotate-7.lua)', async () => {
  const inbox = new Inbox(redis, { prefix: 'lin:', cap: 5 });
  const uid = 'nina';
  const first = await appendMany(inbox, uid, 6); // the claim's read found latest 4; 5 and 6 came since
  const second = await inbox.rotateEpoch(uid, first, 60_000, 4) as string;
  assert.deepEqual(await inbox.lineage(uid), { epoch: second, replaced: first, through: 4 }, 'before (rotate-5): through 6');
  await appendMany(inbox, uid, 1);
  await redis.hdel('lin:{nina}:meta', 'resume_rotated');
  const third = await inbox.rotateEpoch(uid, second, 60_000, 99) as string;
  assert.deepEqual(await inbox.lineage(uid), { epoch: third, replaced: second, through: 7 }, 'never above the counter');
  const fourth = await inbox.rotateEpoch(uid, third, 0, 7) as string;
  assert.deepEqual(await inbox.lineage(uid), { epoch: fourth, replaced: third, through: 0 }, 'a proven one vouches for none, whatever was read');
  await assert.rejects(inbox.rotateEpoch(uid, fourth, 60_000, -1), /latest seq read/);
});
