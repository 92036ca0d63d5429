/**
 * Delivery end to end (DESIGN.md §5, §6, §11): a producer POSTs over HTTP, real `ws`
 * clients receive on `/v1/connect` of the real service on a real port, with a private
 * redis-server. Catch-up, live delivery and the heartbeat pull, resume with `last_seq`
 * and `epoch`, several devices, the window, redelivery and 4008, `gap` and `reset`,
 * expired content, and Redis going away under a connected device. Tests with the
 * default settings share one service; the others start their own with short timers.
 * Every wait is on a frame, a close, or a bounded poll of a value with no event (an ack
 * cursor written coalesced, an expiry).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Inbox } from '../../src/inbox/inbox.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, type CleanupContext, type CleanupList } from '../harness/pixiu-server.js';
import { metricSample, openInbox, waitUntil, whenConnected } from '../harness/checks.js';
import type { Frame, TestClient } from '../harness/ws-client.js';
import { expectPong, type GatewayFixture } from './gateway-fixture.js';
import {
  expectFrame, expectMsgs, expectWelcome as welcome, postMany, postOne, seqOf, snapshotInbox, startDelivery, waitCursor,
} from './delivery-fixture.js';

let redis: RedisServer;
/** The service with the default settings, shared by the tests that need nothing else. */
let shared: GatewayFixture;
let sharedInbox: Inbox;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  ({ gw: shared, inbox: sharedInbox } = await startDelivery(files, 'px', { redisUrl: redis.url }));
});

after(async () => {
  // The private redis-server must die even when a clean-up step fails, or the run hangs.
  try {
    await files.run();
  } finally {
    await redis?.destroy();
  }
});

/**
 * Clean-up for a test with a Redis of its own: run last added first when the test ends,
 * so the service and its clients go before their Redis.
 */
function ownSteps(t: CleanupContext): CleanupList {
  const steps = cleanupList();
  t.after(() => steps.run());
  return steps;
}

test('an offline user with 500 messages connects without last_seq: seq 1..500 in order, once each; the ack cursor reaches 500', async () => {
  const ids = await postMany(shared.client, 'olga', 500);
  const client = await shared.connect('olga', { device: 'phone' });
  await welcome(client, 1, 500);
  await expectMsgs(client, 1, 500, ids);
  assert.equal(await client.receivesWithin(200), false, 'nothing after 500: no repeat');
  await waitCursor(sharedInbox, 'olga', 'phone', 500);
  const report = await shared.client.get(`/v1/messages/${ids[499]}`);
  assert.equal(report.status, 200, report.text);
  assert.deepEqual((report.body as { recipients: unknown }).recipients, [{ user: 'olga', seq: 500, acked_by: ['phone'] }]);
});

test('devices named like Object.prototype members (constructor, toString) start from seq 1, with no inherited cursor', async () => {
  const ids = await postMany(shared.client, 'proto-dev', 3);
  for (const device of ['constructor', 'toString']) {
    const client = await shared.connect('proto-dev', { device });
    await welcome(client, 1, 3);
    await expectMsgs(client, 1, 3, ids);
    await waitCursor(sharedInbox, 'proto-dev', device, 3);
    await client.close();
  }
});

test('a connected device gets a newly POSTed message live, the frame as DESIGN.md §6 names it', async () => {
  const client = await shared.connect('liv', { device: 'phone' });
  const w = await welcome(client, 1, 0);
  assert.equal(w.epoch, null, 'no inbox yet');
  const sent = await postOne(shared.client, 'liv', { from: 'ann', type: 'chat.text', data: { text: 'hi 👋' } });
  const f = await expectFrame(client, 'msg', 2000);
  // Welcomed with no epoch, the first msg names the one the inbox was created with.
  const { epoch } = (await shared.client.get('/v1/users/liv/messages')).body as { epoch: string };
  assert.match(epoch, /^.{12}$/);
  assert.deepEqual(f, { t: 'msg', seq: 1, id: sent.id, type: 'chat.text', from: 'ann', ts: f.ts, data: { text: 'hi 👋' }, epoch });
  assert.equal(typeof f.ts, 'number');
  // Told once: the next msg is as DESIGN.md §6 names it.
  const next = await postOne(shared.client, 'liv', { type: 'chat.text', data: {} });
  const g = await expectFrame(client, 'msg', 2000);
  assert.deepEqual(g, { t: 'msg', seq: 2, id: next.id, type: 'chat.text', ts: g.ts, data: {} });
});

test('live messages to a caught-up device are sent without reading the inbox, as a reconnect would read them', async () => {
  const client = await shared.connect('ofra', { device: 'phone' });
  await welcome(client, 1, 0);
  // The first append creates the inbox: its epoch is new to the session, which reads it.
  await postOne(shared.client, 'ofra');
  client.ack((await expectFrame(client, 'msg', 2000)).seq as number);
  const before = await deliveryFetches(shared);
  const live = [];
  for (let i = 0; i < 20; i++) {
    const body = i % 2 === 0 ? { from: 'ann', type: 'chat.text', data: { i, text: 'é 👋' } } : { type: 'test.n', data: [i, null] };
    const sent = await postOne(shared.client, 'ofra', body);
    const f = await expectFrame(client, 'msg', 2000);
    assert.deepEqual([f.seq, f.id], [sent.seq, sent.id]);
    client.ack(f.seq as number);
    live.push(f);
  }
  const reads = (await deliveryFetches(shared)) - before;
  // A server heartbeat of the connection may fall in the run and pull once.
  assert.ok(reads <= 1, `${reads} inbox reads for 20 live messages`);
  const again = await shared.connect('ofra', { device: 'tablet', params: { last_seq: 1 } });
  await welcome(again, 2, 21);
  const read = [];
  for (let i = 0; i < 20; i++) read.push(await expectFrame(again, 'msg', 2000));
  assert.deepEqual(live, read, 'the frames sent live are the frames a fetch builds');
});

test('with notify off, a POSTed message still arrives, pulled by the next heartbeat', async (t) => {
  const HEARTBEAT_MS = 200;
  const { gw: server } = await startDelivery(t, 'hb', { redisUrl: redis.url, notify: 'off', heartbeatMs: String(HEARTBEAT_MS) });
  const client = await server.connect('hugo', { device: 'phone' });
  await welcome(client, 1, 0);
  const posted = performance.now();
  const sent = await postOne(server.client, 'hugo');
  // Bounded by a few heartbeats: without the heartbeat's pull it never comes.
  const f = await expectFrame(client, 'msg', 10 * HEARTBEAT_MS);
  t.diagnostic(`arrived ${(performance.now() - posted).toFixed(0)} ms after the POST (heartbeat ${HEARTBEAT_MS} ms)`);
  assert.deepEqual([f.seq, f.id], [1, sent.id]);
});

test('with notify off, a client `ping` pulls the inbox: a POSTed message arrives after the pong, long before a server heartbeat', async (t) => {
  // DESIGN.md §6: `ping` is answered with `pong` and treated as heartbeat (a pull). The
  // server's own first heartbeat is at least half the default 25 s period away.
  const { gw: server } = await startDelivery(t, 'pp', { redisUrl: redis.url, notify: 'off' });
  const client = await server.connect('pia', { device: 'phone' });
  await welcome(client, 1, 0);
  const sent = await postOne(server.client, 'pia');
  client.send({ t: 'ping' });
  assert.deepEqual(await client.next(2000), { t: 'pong' });
  const f = await expectFrame(client, 'msg', 5000);
  assert.deepEqual([f.seq, f.id], [1, sent.id]);
});

test('reconnecting mid-stream with last_seq and epoch loses nothing; the only repeats carry the same id and seq', async () => {
  const ids = await postMany(shared.client, 'rey', 300);
  const first = await shared.connect('rey', { device: 'tab' });
  const w = await welcome(first, 1, 300);
  await expectMsgs(first, 1, 120, ids, 1, { ackEvery: 10 });
  await expectMsgs(first, 121, 150, ids, 1, { ackEvery: 0 });
  // Gone without a close, with frames in flight; more messages while it is away.
  first.ws.terminate();
  ids.push(...await postMany(shared.client, 'rey', 50, 301));
  const second = await shared.connect('rey', { device: 'tab', params: { last_seq: 120, epoch: w.epoch as string } });
  await welcome(second, 121, 350);
  await expectMsgs(second, 121, 350, ids, 1, { ackEvery: 25 });
  // Every frame either connection got: each seq with one id, the one posted at it.
  const seen = new Map<number, Set<unknown>>();
  for (const f of [...first.frames, ...second.frames]) {
    if (f.t !== 'msg') continue;
    const at = seen.get(seqOf(f)) ?? new Set();
    at.add(f.id);
    seen.set(seqOf(f), at);
  }
  assert.deepEqual([...seen.keys()].sort((a, b) => a - b), ids.map((_, i) => i + 1), 'every seq, none lost');
  for (const [seq, at] of seen) assert.deepEqual([...at], [ids[seq - 1]], `seq ${seq} always carries its id`);
});

test('two devices of one user both get everything; their cursors move independently', async () => {
  const a = await shared.connect('duo', { device: 'a' });
  const b = await shared.connect('duo', { device: 'b' });
  await welcome(a, 1, 0);
  await welcome(b, 1, 0);
  const ids = await postMany(shared.client, 'duo', 40);
  await expectMsgs(a, 1, 40, ids);
  await expectMsgs(b, 1, 40, ids, 1, { ackEvery: 0 });
  b.ack(15);
  await waitCursor(sharedInbox, 'duo', 'a', 40);
  await waitCursor(sharedInbox, 'duo', 'b', 15);
  ids.push(...await postMany(shared.client, 'duo', 10, 41));
  await expectMsgs(a, 41, 50, ids);
  await expectMsgs(b, 41, 50, ids, 1, { ackEvery: 0 });
  const cursors = await waitCursor(sharedInbox, 'duo', 'a', 50);
  assert.equal(cursors.b, 15, "a's acks did not move b");
  // b, back without last_seq, resumes after its own cursor.
  await b.close();
  const b2 = await shared.connect('duo', { device: 'b' });
  await welcome(b2, 16, 50);
  await expectMsgs(b2, 16, 50, ids);
  await waitCursor(sharedInbox, 'duo', 'b', 50);
});

test("GET /v1/messages/{id}'s acked_by counts acks under the inbox's current epoch: [] after a new epoch, until a device acks under it", async () => {
  const user = 'receipts';
  const ids = await postMany(shared.client, user, 10);
  const ackedBy = async (): Promise<unknown> => {
    const report = await shared.client.get(`/v1/messages/${ids[4]}`);
    assert.equal(report.status, 200, report.text);
    return (report.body as { recipients: { acked_by: unknown }[] }).recipients[0]?.acked_by;
  };
  const phone = await shared.connect(user, { device: 'phone' });
  const w = await welcome(phone, 1, 10);
  await expectMsgs(phone, 1, 10, ids);
  await waitCursor(sharedInbox, user, 'phone', 10);
  assert.deepEqual(await ackedBy(), ['phone']);
  // A device back with a last_seq above the latest under the inbox's own epoch: a new
  // epoch, the numbering kept (docs/protocol.md): every device is to get the inbox again.
  const tablet = await shared.connect(user, { device: 'tablet', params: { last_seq: 11, epoch: w.epoch as string } });
  const fresh = await welcome(tablet, 1, 10);
  assert.notEqual(fresh.epoch, w.epoch, 'a new epoch');
  assert.deepEqual(await tablet.next(), { t: 'reset', epoch: fresh.epoch, seq: 10 });
  await expectMsgs(tablet, 1, 10, ids, 1, { ackEvery: 0 });
  await tablet.close();
  // The phone, connected, is reset and sent the inbox again: its acks of the old epoch no
  // longer say it has the messages, and the report says so.
  assert.deepEqual(await phone.next(), { t: 'reset', epoch: fresh.epoch, seq: 10 });
  for (let seq = 1; seq <= 10; seq++) {
    const f = await phone.next();
    assert.deepEqual([f.t, f.seq, f.id, f.redelivered], ['msg', seq, ids[seq - 1], true], JSON.stringify(f));
  }
  assert.deepEqual(await ackedBy(), [], 'the phone acked 10 under the old epoch: not counted under the new one');
  phone.ack(10);
  await waitCursor(sharedInbox, user, 'phone', 10);
  assert.deepEqual(await ackedBy(), ['phone'], 'its ack under the new epoch counts');
});

test('a device that acked and comes straight back resumes after its last ack, before the node has written it', async (t) => {
  // Cursors are written every minute here: what the device acked is only in this
  // node's memory when it comes back (closed, or replacing its live connection).
  const { gw: server } = await startDelivery(t, 'quick', { redisUrl: redis.url, ackFlushIntervalMs: '60000' });
  // Another device keeps the user's session on this node (a last logout writes at once).
  const laptop = await server.connect('quick', { device: 'laptop' });
  await welcome(laptop, 1, 0);
  const phone = await server.connect('quick', { device: 'phone' });
  await welcome(phone, 1, 0);
  const ids = await postMany(server.client, 'quick', 3);
  await expectMsgs(phone, 1, 3, ids);
  await expectPong(phone);
  await phone.close();
  const back = await server.connect('quick', { device: 'phone' });
  await welcome(back, 4, 3);
  ids.push(...await postMany(server.client, 'quick', 2, 4));
  await expectMsgs(back, 4, 5, ids);
  await expectPong(back);
  const again = await server.connect('quick', { device: 'phone' });
  await welcome(again, 6, 5);
  assert.equal((await back.waitClose()).code, 4002);
});

test('acks whose write failed when the device left are written when it comes back to the node, before its cursor is read', async (t) => {
  const steps = ownSteps(t);
  const own = await RedisServer.start({ aof: true });
  steps.after(() => own.destroy());
  // Cursors are written every minute here, so the failed write's retry (the next round)
  // cannot come first: only the reconnect can write the acks in time.
  const { gw: server } = await startDelivery(steps, 'left', { redisUrl: own.url, ackFlushIntervalMs: '60000', redisCommandTimeoutMs: '300' });
  const ids = await postMany(server.client, 'lea', 3);
  const phone = await server.connect('lea', { device: 'phone' });
  await welcome(phone, 1, 3);
  await expectMsgs(phone, 1, 3, ids);
  await expectPong(phone);
  await own.stop();
  try {
    // The user's last logout writes its acks at once, and that write fails (Redis is
    // down: it is refused at once). The logout is done once the gauge shows it.
    await phone.close();
    await waitUntil('the server has let the connection go', async () =>
      metricSample((await server.client.get('/metrics')).text, 'pixiu_ws_connections') === 0);
  } finally {
    await own.restart();
  }
  await waitUntil('the service reaches Redis again', async () => (await server.client.get('/readyz')).status === 200);
  const back = await server.connect('lea', { device: 'phone' });
  // Resumed after what the device acked, not from seq 1.
  await welcome(back, 4, 3);
  const next = await postOne(server.client, 'lea');
  await expectMsgs(back, 4, 4, [...ids, next.id]);
});

test('an ack of where a from=latest or last_seq connection started is stored: a plain reconnect resumes after it', async () => {
  const ids = await postMany(shared.client, 'lately', 3);
  const fresh = await shared.connect('lately', { device: 'phone', params: { from: 'latest' } });
  await welcome(fresh, 4, 3);
  fresh.ack(3);
  await waitCursor(sharedInbox, 'lately', 'phone', 3);
  await fresh.close();
  const back = await shared.connect('lately', { device: 'phone' });
  await welcome(back, 4, 3);
  assert.equal(await back.receivesWithin(200), false, 'nothing of 1..3 again');
  ids.push(...await postMany(shared.client, 'lately', 1, 4));
  await expectMsgs(back, 4, 4, ids);
  await back.close();
  // The same for a last_seq above the stored cursor (4): the client's ack of 5 is stored.
  ids.push(...await postMany(shared.client, 'lately', 1, 5));
  const resumed = await shared.connect('lately', { device: 'phone', params: { last_seq: '5' } });
  await welcome(resumed, 6, 5);
  resumed.ack(5);
  await waitCursor(sharedInbox, 'lately', 'phone', 5);
});

test('window: a client that never acks gets exactly W messages, then nothing until it acks; then it continues', async (t) => {
  const W = 10;
  const QUIET_MS = 300;
  const { gw: server } = await startDelivery(t, 'win', { redisUrl: redis.url, deliveryWindow: String(W) });
  const ids = await postMany(server.client, 'wes', 25);
  const client = await server.connect('wes', { device: 'phone' });
  await welcome(client, 1, 25);
  await expectMsgs(client, 1, 10, ids, 1, { ackEvery: 0 });
  assert.equal(await client.receivesWithin(QUIET_MS), false, 'nothing past the window');
  client.ack(4);
  await expectMsgs(client, 11, 14, ids, 1, { ackEvery: 0 });
  assert.equal(await client.receivesWithin(QUIET_MS), false, 'four acked, four more');
  client.ack(14);
  await expectMsgs(client, 15, 24, ids, 1, { ackEvery: 0 });
  assert.equal(await client.receivesWithin(QUIET_MS), false);
  client.ack(24);
  await expectMsgs(client, 25, 25, ids);
});

test('redelivery: an unacked message is resent marked redelivered after the ack timeout; after the last round the connection is closed 4008', async (t) => {
  const ACK_TIMEOUT_MS = 200;
  const BACKOFF = [50, 50, 50];
  const { gw: server } = await startDelivery(t, 'redo', { redisUrl: redis.url, ackTimeoutMs: String(ACK_TIMEOUT_MS), redeliveryBackoffMs: BACKOFF.join(',') });
  const ids = await postMany(server.client, 'ria', 2);
  // Before the connection: the originals go out after this, the redelivery an ack timeout after them.
  const connectedAt = performance.now();
  const client = await server.connect('ria', { device: 'phone' });
  await welcome(client, 1, 2);
  await expectMsgs(client, 1, 2, ids, 1, { ackEvery: 0 });
  for (let round = 1; round <= BACKOFF.length; round++) {
    for (const seq of [1, 2]) {
      const f = await expectFrame(client, 'msg');
      assert.deepEqual([f.seq, f.id, f.redelivered], [seq, ids[seq - 1], true], `round ${round}`);
      if (round === 1 && seq === 1) {
        assert.ok(performance.now() - connectedAt >= ACK_TIMEOUT_MS, 'not before the ack timeout');
      }
    }
  }
  const { code } = await client.waitClose();
  assert.equal(code, 4008, 'ack timeout');
  assert.equal(client.frames.filter((f) => f.t === 'msg').length, 2 * (1 + BACKOFF.length), 'no other sends');
});

test('an ack after a redelivery stops the rounds: nothing more is resent and the connection stays open', async (t) => {
  const ACK_TIMEOUT_MS = 200;
  // The round after the first waits 300 ms: the ack lands well before it even on a busy loop.
  const ROUND_MS = 300;
  const { gw: server } = await startDelivery(t, 'redo2', { redisUrl: redis.url, ackTimeoutMs: String(ACK_TIMEOUT_MS), redeliveryBackoffMs: `${ROUND_MS},${ROUND_MS},${ROUND_MS}` });
  const ids = await postMany(server.client, 'rob', 2);
  const client = await server.connect('rob', { device: 'phone' });
  await welcome(client, 1, 2);
  await expectMsgs(client, 1, 2, ids, 1, { ackEvery: 0 });
  const again = await expectFrame(client, 'msg');
  assert.deepEqual([again.seq, again.redelivered], [1, true]);
  await expectFrame(client, 'msg');
  client.ack(2);
  // Longer than the wait before the next round, had the ack been ignored.
  assert.equal(await client.receivesWithin(2 * ROUND_MS), false, 'no further round');
  assert.equal(client.ws.readyState, client.ws.OPEN);
});

test('gap: inbox cap 10, 25 messages while offline, last_seq 0 → gap {from 1, to 15, reason trimmed}, then 16..25', async (t) => {
  const { gw: server } = await startDelivery(t, 'gap', { redisUrl: redis.url, inboxCap: '10' });
  const ids = await postMany(server.client, 'gus', 25);
  const client = await server.connect('gus', { device: 'phone', params: { last_seq: 0 } });
  await welcome(client, 16, 25);
  assert.deepEqual(await client.next(), { t: 'gap', from: 1, to: 15, reason: 'trimmed' });
  await expectMsgs(client, 16, 25, ids);
});

test('a live message POSTed while a device catches up on a 2,000-message backlog: all 2,001 in seq order, none skipped', async () => {
  const ids = await postMany(shared.client, 'cato', 2000);
  const client = await shared.connect('cato', { device: 'laptop' });
  await welcome(client, 1, 2000);
  await expectMsgs(client, 1, 200, ids, 1, { ackEvery: 50 });
  // Mid catch-up: the window (100) means the server has sent at most 300 so far.
  const live = await postOne(shared.client, 'cato', { data: { live: true } });
  assert.equal(live.seq, 2001);
  ids.push(live.id);
  await expectMsgs(client, 201, 2001, ids, 1, { ackEvery: 50 });
  assert.deepEqual(client.frames.at(-1)?.data, { live: true });
  assert.equal(await client.receivesWithin(100), false);
});

test('a sent message whose content expires before its redelivery round comes back as a gap marked redelivered', async (t) => {
  const { gw: server } = await startDelivery(t, 'redo-exp', { redisUrl: redis.url, ackTimeoutMs: '1500', redeliveryBackoffMs: '5000' });
  const client = await server.connect('rexp', { device: 'phone' });
  await welcome(client, 1, 0);
  const expiring = await postOne(server.client, 'rexp', { ttl: 1 });
  const kept = await postOne(server.client, 'rexp');
  await expectMsgs(client, 1, 2, [expiring.id, kept.id], 1, { ackEvery: 0 });
  // The round an ack timeout later: seq 1 expired meanwhile, seq 2 is resent.
  assert.deepEqual(await client.next(), { t: 'gap', from: 1, to: 1, reason: 'expired', redelivered: true });
  const again = await expectFrame(client, 'msg');
  assert.deepEqual([again.seq, again.id, again.redelivered], [2, kept.id, true]);
  // A new message after it is neither.
  const live = await postOne(server.client, 'rexp');
  const next = await expectFrame(client, 'msg');
  assert.deepEqual([next.seq, next.id, next.redelivered], [3, live.id, undefined]);
});

test('content that expired reaches the client as a gap of its seq, and later messages still arrive', async () => {
  const first = await postOne(shared.client, 'eve');
  const expiring = await postOne(shared.client, 'eve', { ttl: 1 });
  await waitUntil('the 1 s message expired (GET /v1/messages/{id} is 404)',
    async () => (await shared.client.get(`/v1/messages/${expiring.id}`)).status === 404, 5000);
  const last = await postOne(shared.client, 'eve');
  const client = await shared.connect('eve', { device: 'phone' });
  await welcome(client, 1, 3);
  await expectMsgs(client, 1, 1, [first.id]);
  assert.deepEqual(await client.next(), { t: 'gap', from: 2, to: 2, reason: 'expired' });
  await expectMsgs(client, 3, 3, [first.id, expiring.id, last.id]);
  // Live after the gap too.
  const live = await postOne(shared.client, 'eve');
  await expectMsgs(client, 4, 4, [live.id], 4);
});

/**
 * A service on a Redis of its own, and `user`'s phone connected and caught up on 3
 * messages; `flushall` wipes that Redis (the inbox lost, as DESIGN.md §11 imagines).
 */
async function caughtUpOnOwnRedis(t: CleanupContext, prefix: string, user: string): Promise<{
  server: GatewayFixture; client: TestClient; epoch: string; flushall: () => Promise<unknown>; inbox: Inbox;
}> {
  const steps = ownSteps(t);
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: server } = await startDelivery(steps, prefix, { redisUrl: own.url });
  const { redis: raw, inbox } = await openInbox(steps, own.url, `${prefix}:`);
  const ids = await postMany(server.client, user, 3);
  const client = await server.connect(user, { device: 'phone' });
  const w = await welcome(client, 1, 3);
  await expectMsgs(client, 1, 3, ids);
  return { server, client, epoch: w.epoch as string, flushall: () => raw.flushall(), inbox };
}

test('reset: after FLUSHALL, reconnecting with the old epoch and last_seq gets `reset`, then the new messages from seq 1', async (t) => {
  const { server, client: old, epoch, flushall } = await caughtUpOnOwnRedis(t, 'rst', 'ros');
  await old.close();
  await flushall();
  const fresh = await postOne(server.client, 'ros');
  assert.equal(fresh.seq, 1, 'a new inbox');

  const after1 = await server.connect('ros', { device: 'phone', params: { last_seq: 3, epoch } });
  const w2 = await welcome(after1, 1, 1);
  assert.notEqual(w2.epoch, epoch);
  assert.deepEqual(await after1.next(), { t: 'reset', epoch: w2.epoch, seq: 1 });
  await expectMsgs(after1, 1, 1, [fresh.id]);
  await after1.close();

  // The epoch alone decides: last_seq 3 exists again in the new inbox, still a reset.
  const more = await postMany(server.client, 'ros', 2, 2);
  const after2 = await server.connect('ros', { device: 'phone', params: { last_seq: 3, epoch } });
  await welcome(after2, 1, 3);
  assert.deepEqual(await after2.next(), { t: 'reset', epoch: w2.epoch, seq: 3 });
  await expectMsgs(after2, 1, 3, [fresh.id, ...more]);
});

/**
 * A service on a Redis of its own, and a snapshot of `user`'s keys: `restore` puts them
 * back as they were when `snapshot` was called (Redis giving the inbox back with less:
 * a restored snapshot, a failover, a lost last second of AOF; DESIGN.md §11).
 */
async function rollbackable(t: CleanupContext, prefix: string, user: string): Promise<{
  server: GatewayFixture; inbox: Inbox; snapshot: () => Promise<() => Promise<void>>;
}> {
  const steps = ownSteps(t);
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: server } = await startDelivery(steps, prefix, { redisUrl: own.url });
  const { redis: raw, inbox } = await openInbox(steps, own.url, `${prefix}:`);
  const keys = inbox.keys.user(user);
  const snapshot = (): Promise<() => Promise<void>> => snapshotInbox(raw, keys);
  return { server, inbox, snapshot };
}

test('Redis gives an inbox back with less (its keys restored from before the last messages): a new epoch; the connected device, and an offline one resuming in the old epoch, are reset; stored cursors are dropped', async (t) => {
  const user = 'rolf';
  const { server, inbox, snapshot } = await rollbackable(t, 'rbk', user);
  const before = await postMany(server.client, user, 3);
  // The tablet gets and acks 1..3; then the user's keys are what a snapshot taken now holds.
  const tablet = await server.connect(user, { device: 'tablet' });
  const w = await welcome(tablet, 1, 3);
  const epoch = w.epoch as string;
  await expectMsgs(tablet, 1, 3, before);
  await waitCursor(inbox, user, 'tablet', 3);
  const restore = await snapshot();
  // Two more, which the tablet gets and acks before it goes offline, and the phone too.
  const lost = await postMany(server.client, user, 2, 4);
  await expectMsgs(tablet, 4, 5, [...before, ...lost]);
  await waitCursor(inbox, user, 'tablet', 5);
  await tablet.close();
  const phone = await server.connect(user, { device: 'phone' });
  await welcome(phone, 1, 5);
  await expectMsgs(phone, 1, 5, [...before, ...lost]);

  // Redis comes back with the snapshot's keys: seqs 4 and 5 are gone under the same epoch.
  await restore();
  const again = await postOne(server.client, user);
  assert.equal(again.seq, 4, 'seq 4 again, for another message');
  // The connected phone: reset under a new epoch, then everything retained.
  const reset = await expectFrame(phone, 'reset', 5000);
  assert.notEqual(reset.epoch, epoch, 'a new epoch');
  assert.equal(reset.seq, 4);
  await expectMsgs(phone, 1, 4, [...before, again.id]);
  const cursors = await inbox.cursors(user);
  assert.equal(Object.hasOwn(cursors, 'tablet'), false, `the tablet's cursor counted seqs of the old epoch: ${JSON.stringify(cursors)}`);

  // Two more: the inbox's latest passes the tablet's last_seq (5) again. Resuming in the
  // old epoch it is reset, not sent seq 6 alone (which would skip the new 4 and 5).
  const newer = await postMany(server.client, user, 2, 5);
  const back = await server.connect(user, { device: 'tablet', params: { last_seq: 5, epoch } });
  await welcome(back, 1, 6);
  assert.deepEqual(await back.next(), { t: 'reset', epoch: reset.epoch, seq: 6 });
  await expectMsgs(back, 1, 6, [...before, again.id, ...newer]);
});

test('Redis gives an inbox back with less, then one batch passes the old latest before any read: the connected device is still reset under a new epoch, nothing skipped', async (t) => {
  const user = 'rudi';
  const { server, inbox, snapshot } = await rollbackable(t, 'rbb', user);
  const phone = await server.connect(user, { device: 'phone' });
  await welcome(phone, 1, 0);
  const kept = await postMany(server.client, user, 2);
  await expectMsgs(phone, 1, 2, kept);
  await waitCursor(inbox, user, 'phone', 2);
  const restore = await snapshot();
  const epoch = (await inbox.range(user, 0, 1)).epoch;
  assert.ok(epoch !== null);
  const lost = await postMany(server.client, user, 2, 3);
  await expectMsgs(phone, 3, 4, [...kept, ...lost]);
  await restore();
  // One batch: seqs 3, 4 and 5 are assigned before the phone's session reads anything.
  const batch = await postMany(server.client, user, 3, 3);
  const reset = await expectFrame(phone, 'reset', 5000);
  assert.notEqual(reset.epoch, epoch, 'a new epoch');
  assert.equal(reset.seq, 5);
  await expectMsgs(phone, 1, 5, [...kept, ...batch]);
});

test('a connected device whose inbox is lost (FLUSHALL) gets `reset`, then the new message, without waiting for a heartbeat', async (t) => {
  const { server, client, epoch, flushall } = await caughtUpOnOwnRedis(t, 'rst2', 'rua');
  await flushall();
  const fresh = await postOne(server.client, 'rua');
  // The heartbeat is 25 s: the append's notify must be enough.
  const reset = await expectFrame(client, 'reset', 2000);
  assert.notEqual(reset.epoch, epoch);
  assert.equal(reset.seq, 1);
  await expectMsgs(client, 1, 1, [fresh.id]);
});

test('a device with a full window whose inbox is lost (FLUSHALL) gets `reset` on its ping, not only after an ack or a redelivery round', async (t) => {
  const steps = ownSteps(t);
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: server, redis: raw } = await startDelivery(steps, 'rstw', { redisUrl: own.url, deliveryWindow: '3' });
  const ids = await postMany(server.client, 'rwa', 5);
  const client = await server.connect('rwa', { device: 'phone' });
  const w = await welcome(client, 1, 5);
  await expectMsgs(client, 1, 3, ids, 1, { ackEvery: 0 });
  // Three in flight, unacked: the window is full. The ack timeout (10 s) is far off.
  await raw.flushall();
  const fresh = await postOne(server.client, 'rwa');
  client.send({ t: 'ping' });
  // The append's notify and the ping are both pulls; either one finds the new epoch.
  const frames: Frame[] = [];
  while (frames.length < 2) {
    const f = await client.next(2000);
    if (f.t !== 'pong') frames.push(f);
  }
  const [reset, msg] = frames as [Frame, Frame];
  assert.equal(reset.t, 'reset', JSON.stringify(frames));
  assert.notEqual(reset.epoch, w.epoch);
  assert.deepEqual([msg.t, msg.seq, msg.id], ['msg', 1, fresh.id]);
});

test('an ack naming the epoch before a reset (sent before the client read the reset) moves nothing and is not refused; one naming the new epoch is stored', async (t) => {
  const { server, client, epoch, flushall, inbox } = await caughtUpOnOwnRedis(t, 'rst3', 'rho');
  await flushall();
  const ids = await postMany(server.client, 'rho', 2);
  const reset = await expectFrame(client, 'reset', 2000);
  await expectMsgs(client, 1, 2, ids, 1, { ackEvery: 0 });
  // Seq 2 of the old inbox: acked under the new one it would mark a message never read.
  client.send({ t: 'ack', seq: 2, epoch });
  client.send({ t: 'ping' });
  assert.deepEqual(await client.next(), { t: 'pong' }, 'no error frame for it');
  client.send({ t: 'ack', seq: 1, epoch: reset.epoch });
  await waitCursor(inbox, 'rho', 'phone', 1);
  client.send({ t: 'ack', seq: 1, epoch: '' });
  assert.equal((await client.next()).t, 'error', 'an empty epoch is a bad frame');
});

test('Redis stopped under a connected device: the connection stays, and delivery resumes with no loss once Redis is back', async (t) => {
  const steps = ownSteps(t);
  const own = await RedisServer.start({ aof: true });
  steps.after(() => own.destroy());
  const { gw: server, inbox, redis: testRedis } = await startDelivery(steps, 'down', {
    redisUrl: own.url, deliveryWindow: '10', heartbeatMs: '200', redisCommandTimeoutMs: '300',
  });
  const ids = await postMany(server.client, 'dora', 30);
  const client = await server.connect('dora', { device: 'phone' });
  await welcome(client, 1, 30);
  await expectMsgs(client, 1, 10, ids, 1, { ackEvery: 0 });
  await own.stop();
  try {
    // The ack wants 11..20 while the inbox cannot be read: its fetch, the retry and the
    // heartbeats' pulls (every 200 ms) fail while this waits.
    client.ack(10);
    assert.equal(await client.receivesWithin(500), false, 'nothing can be sent while Redis is down');
    assert.equal(client.ws.readyState, client.ws.OPEN, 'the connection stays');
  } finally {
    await own.restart();
  }
  await expectMsgs(client, 11, 30, ids, 1, { ackEvery: 10, timeoutMs: 15_000 });
  const live = await postOne(server.client, 'dora');
  await expectMsgs(client, 31, 31, [...ids, live.id]);
  // The test's own client reconnects on its own back-off, maybe after the server's.
  await whenConnected(testRedis);
  await waitCursor(inbox, 'dora', 'phone', 31);
});

/** `pixiu_delivery_fetches_total` of a service, from `/metrics`. */
async function deliveryFetches(gw: GatewayFixture): Promise<number> {
  const text = (await gw.client.get('/metrics', { headers: { authorization: '' } })).text;
  const m = /^pixiu_delivery_fetches_total (\d+)/m.exec(text);
  assert.ok(m, 'pixiu_delivery_fetches_total is exported');
  return Number(m[1]);
}

test('a retried POST (same client_msg_id) of a message the device already got resets nothing: the next message follows it under the same epoch', async () => {
  // The retry is a duplicate append, announced again (ingest/inbox-appends.ts `announce`) and offered to
  // the session with the seq it already delivered and the same MsgID. That is not "Redis
  // gave the inbox back with less" (a delivered seq naming *another* message): no new
  // epoch, no `reset` on the device's connections.
  const client = await shared.connect('dupe', { device: 'phone' });
  await welcome(client, 1, 0);
  const body = { to: 'dupe', type: 't', data: 'first', client_msg_id: 'dupe-1' };
  const first = await shared.client.post('/v1/messages', body);
  assert.equal(first.status, 201, first.text);
  const m1 = await expectFrame(client, 'msg', 2000);
  assert.equal(m1.seq, 1);
  client.ack(1);
  const retry = await shared.client.post('/v1/messages', body);
  assert.equal(retry.status, 200, retry.text);
  assert.equal((retry.body as { duplicate: boolean }).duplicate, true);
  await postOne(shared.client, 'dupe', { data: 'second' });
  const next = await client.next(5000);
  assert.deepEqual([next.t, next.seq, next.data], ['msg', 2, 'second'], JSON.stringify(next));
  assert.equal(client.frames.some((f) => f.t === 'reset'), false, 'no reset');
});
