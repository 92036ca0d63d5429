/**
 * A batch sent as several runs (messages.ts: runs of one kind, one append flow for all
 * of them) keeps each user's messages in batch order across a retry (docs/api.md
 * "Messages"): an item that fails 503 before its appends fails the later runs' items
 * too, so the producer's retry of the batch appends it before them, never after.
 * The 503 is a real one: the item's `client_msg_id` is claimed by another store that is
 * storing it now (a pending claim in Redis, as a node mid-write leaves it), on a Redis
 * shared by two stores. Real stores, inbox, rooms and redis-server; the runs are handed
 * to the ingest as the batch route hands them. An item dropped because its client left
 * (src/ingest/abandoned.ts) holds back the later ones the same way, but they fail with an
 * UNAVAILABLE of their own, not its RequestAbandoned: they were stored.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { ClientIdClaims } from '../../src/cluster/client-id-claims.js';
import { PixiuError } from '../../src/errors.js';
import type { Flow, Inbox } from '../../src/inbox/inbox.js';
import { RequestAbandoned, type ClientGone } from '../../src/ingest/abandoned.js';
import { Ingest } from '../../src/ingest/ingest.js';
import { Keys } from '../../src/redis/keys.js';
import { Rooms } from '../../src/rooms/membership.js';
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

/** An ingest on a Redis shared with another store, and each of `cids` claimed by that store now (storing it). */
async function ingestBesideAWriter(t: Parameters<typeof openStore>[0], ...cids: string[]): Promise<{ ingest: Ingest; rooms: Rooms }> {
  const store = await openStore(t, await tempDataDir(t), { partitions: 8, partitionBase: 0 });
  await redis.hset(keys.storeDescriptions(), 'here', '{}', 'writer', '{}');
  const claims = new ClientIdClaims(redis, keys, 'here');
  await claims.refresh();
  assert.equal(claims.active, true);
  for (const cid of cids) await redis.set(keys.clientIdClaim(cid), 'P|writer', 'PX', 30_000);
  const rooms = new Rooms(redis, keys, 100);
  return { ingest: new Ingest({ store, inbox, rooms, claims }), rooms };
}

function isUnavailable(outcome: PromiseSettledResult<unknown> | undefined): boolean {
  return outcome?.status === 'rejected' && outcome.reason instanceof PixiuError && outcome.reason.code === 'UNAVAILABLE';
}

test('a user item that fails 503 before its appends fails the next run\'s room item to the same user: nothing lands ahead of it', async (t) => {
  const { ingest, rooms } = await ingestBesideAWriter(t, 'runs-user-first');
  await rooms.add('runs-room-1', ['runs-ann']);
  const flow: Flow = {};
  const [user] = await ingest.sendBatch([{ to: 'runs-ann', type: 't', data: 0, client_msg_id: 'runs-user-first' }], flow);
  assert.ok(isUnavailable(user), `503: ${String(user?.status === 'rejected' ? user.reason : 'fulfilled')}`);
  const [room] = await ingest.sendRoomBatch([{ room: 'runs-room-1', type: 't', data: 1, client_msg_id: 'runs-room-later' }], flow);
  assert.ok(isUnavailable(room), `the later run's item fails 503 too: ${JSON.stringify(room)}`);
  assert.deepEqual(await readWholeInbox(inbox, 'runs-ann'), [], 'nothing reached runs-ann ahead of the failed item');
});

test('a room item that fails 503 before its appends fails the next run\'s user item to a member, and the next room item of its own run', async (t) => {
  const { ingest, rooms } = await ingestBesideAWriter(t, 'runs-room-first');
  await rooms.add('runs-room-2', ['runs-bo']);
  const flow: Flow = {};
  const [failed, sameRun] = await ingest.sendRoomBatch([
    { room: 'runs-room-2', type: 't', data: 0, client_msg_id: 'runs-room-first' },
    { room: 'runs-room-2', type: 't', data: 1, client_msg_id: 'runs-room-second' },
  ], flow);
  assert.ok(isUnavailable(failed), `503: ${JSON.stringify(failed)}`);
  assert.ok(isUnavailable(sameRun), `the same run's later item fails 503 too: ${JSON.stringify(sameRun)}`);
  const [user] = await ingest.sendBatch([{ to: 'runs-bo', type: 't', data: 2, client_msg_id: 'runs-user-later' }], flow);
  assert.ok(isUnavailable(user), `the later run's item fails 503 too: ${JSON.stringify(user)}`);
  assert.deepEqual(await readWholeInbox(inbox, 'runs-bo'), [], 'nothing reached runs-bo ahead of the failed item');
});

test('within a run, every item after the first one to fail 503 fails, also when a later one failed 503 too: an item between them does not go first', async (t) => {
  // Items 0 and 2 fail at their claims, at once; item 1 (to the same user as item 0)
  // is stored after both (its own claim, then its write): it fails with item 0, the
  // first failed, not only with items after the last one failed.
  const { ingest } = await ingestBesideAWriter(t, 'within-0', 'within-2');
  const results = await ingest.sendBatch([
    { to: 'within-ann', type: 't', data: 0, client_msg_id: 'within-0' },
    { to: 'within-ann', type: 't', data: 1, client_msg_id: 'within-1' },
    { to: 'within-cy', type: 't', data: 2, client_msg_id: 'within-2' },
  ], {});
  assert.deepEqual(results.map(isUnavailable), [true, true, true], JSON.stringify(results));
  assert.deepEqual(await readWholeInbox(inbox, 'within-ann'), [], 'nothing reached within-ann ahead of item 0');
});

test('an item that fails 503 before its appends fails a later run\'s item to several users, one of them its recipient', async (t) => {
  const { ingest, rooms } = await ingestBesideAWriter(t, 'runs-many-first');
  await rooms.add('runs-room-3', ['runs-di']);
  const flow: Flow = {};
  const [failed] = await ingest.sendRoomBatch([{ room: 'runs-room-3', type: 't', data: 0, client_msg_id: 'runs-many-first' }], flow);
  assert.ok(isUnavailable(failed), `503: ${JSON.stringify(failed)}`);
  const [many] = await ingest.sendBatch([{ to: ['runs-di', 'runs-ed'], type: 't', data: 1, client_msg_id: 'runs-many-later' }], flow);
  assert.ok(isUnavailable(many), `the later run's item to two users fails 503 too: ${JSON.stringify(many)}`);
  assert.deepEqual(await readWholeInbox(inbox, 'runs-di'), [], 'nothing reached runs-di ahead of the failed item');
});

/**
 * A client that leaves after the first two questions (src/ingest/abandoned.ts): the
 * batches below ask at item 0's and item 1's entries, then after item 0's claim, so item
 * 1 (no client_msg_id, no claim) is stored and item 0 is dropped.
 */
function goneAfterTwo(): ClientGone {
  let asked = 0;
  return () => ++asked > 2;
}

/** Held back by an abandoned item: UNAVAILABLE, but not the RequestAbandoned ("not stored") it was not. */
function isHeldBack(outcome: PromiseSettledResult<unknown> | undefined): boolean {
  return isUnavailable(outcome) && !((outcome as PromiseRejectedResult).reason instanceof RequestAbandoned);
}

// The later run is of the other kind: the flow broken for it carries the held-back error too.
for (const first of ['room', 'user'] as const) {
  test(`a ${first} item stored after an earlier one to the same user was abandoned is held back with an UNAVAILABLE of its own, as is a later run's item`, async (t) => {
    const { ingest, rooms } = await ingestBesideAWriter(t);
    const [room, user] = [`left-room-${first}`, `left-${first}-member`];
    await rooms.add(room, [user]);
    const flow: Flow = {};
    const items = [{ type: 't', data: 0, client_msg_id: `left-${first}-0` }, { type: 't', data: 1 }];
    const [dropped, stored] = first === 'room'
      ? await ingest.sendRoomBatch(items.map((item) => ({ ...item, room })), flow, undefined, goneAfterTwo())
      : await ingest.sendBatch(items.map((item) => ({ ...item, to: user })), flow, goneAfterTwo());
    assert.ok(dropped?.status === 'rejected' && dropped.reason instanceof RequestAbandoned, `item 0 abandoned: ${JSON.stringify(dropped)}`);
    assert.ok(isHeldBack(stored), `item 1 held back, not abandoned: ${String(stored?.status === 'rejected' ? stored.reason : 'fulfilled')}`);
    const later = { type: 't', data: 2 };
    const [next] = first === 'room' ? await ingest.sendBatch([{ ...later, to: user }], flow) : await ingest.sendRoomBatch([{ ...later, room }], flow);
    assert.ok(isHeldBack(next), `the later run's item held back, not abandoned: ${JSON.stringify(next)}`);
    assert.deepEqual(await readWholeInbox(inbox, user), [], `nothing reached ${user} ahead of item 0`);
  });
}
