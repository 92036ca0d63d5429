/**
 * A message that fails part-way (DESIGN.md §7: "Anything less is a non-2xx, and
 * retrying with the same `client_msg_id` completes the message without duplicating it
 * in any inbox"). One recipient's append fails for real and the other's succeeds: the
 * failing recipient's inbox key (`<prefix>{uid}:inbox`, src/redis/keys.ts) is made a
 * plain string, so the append script's stream commands fail with WRONGTYPE. The POST
 * is 500 INTERNAL naming that user (no retry cures a key of the wrong type until an
 * operator repairs it: wrong-type-key.test.ts); once the key is deleted, a retry with
 * the same `client_msg_id` answers the same message id, and each inbox holds it
 * exactly once. A batch item that Redis itself fails (Redis paused) is a 503.
 * A recipient online while the POST fails part-way gets the message at once, and once.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { expectError, metricSample, openInbox } from '../harness/checks.js';
import { cleanupList, startInProcess, type HttpAnswer, type InProcessServer, type PixiuClient } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { addMembers, postRoom } from '../rooms/room-fixture.js';

const PREFIX = 'part:';

/** What `POST /v1/messages` answers on success. */
interface Created {
  id: string;
  recipients: { user: string; seq: number }[];
  duplicate: boolean;
}

/** One message of `GET /v1/users/{uid}/messages`. */
interface Listed {
  seq: number;
  id: string;
  data: unknown;
}

let redis: RedisServer;
let server: InProcessServer;
let client: PixiuClient;
let raw: Redis;
const keys = new Keys(PREFIX);
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  // Registered first, so it runs last, and runs even when an earlier step fails.
  files.after(() => redis.destroy());
  server = await startInProcess(files, { redisUrl: redis.url, redisPrefix: PREFIX });
  ({ client } = server);
  ({ redis: raw } = await openInbox(files, redis.url, PREFIX));
});

after(() => files.run());

/** Every message of `user`'s inbox, through `GET /v1/users/{uid}/messages`. */
async function messagesOf(user: string): Promise<Listed[]> {
  const answer = await client.get(`/v1/users/${user}/messages?limit=100`);
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { messages: Listed[] }).messages;
}

/** Makes `user`'s inbox stream key a plain string: every append to it fails (WRONGTYPE). */
async function breakInbox(user: string): Promise<void> {
  assert.equal(await raw.set(keys.inbox(user), 'not a stream'), 'OK');
}

/** Undoes {@link breakInbox}. */
async function repairInbox(user: string): Promise<void> {
  assert.equal(await raw.del(keys.inbox(user)), 1);
}

/** Asserts the 500 INTERNAL of a recipient whose inbox key has the wrong type, naming `user`, with no Retry-After. */
function expectFailedFor(answer: HttpAnswer, user: string): void {
  expectError(answer, 500, 'INTERNAL', new RegExp(`^internal error: user "${user}"'s inbox cannot be written`));
  assert.equal(answer.headers.get('retry-after'), null);
}

describe('POST /v1/messages that fails for one of two recipients', () => {
  for (const broken of ['second', 'first'] as const) {
    test(`the ${broken} recipient's append fails: 500 naming it; once repaired, the retry with the same client_msg_id completes it once per inbox`, async () => {
      const ok = `ok-${broken}`;
      const bad = `bad-${broken}`;
      const to = broken === 'second' ? [ok, bad] : [bad, ok];
      const body = { to, type: 'chat.text', data: { text: `partial ${broken}` }, client_msg_id: `partial-${broken}` };
      await breakInbox(bad);

      expectFailedFor(await client.post('/v1/messages', body), bad);
      // Part-way: the healthy recipient's append went through before the answer.
      const firstTry = await messagesOf(ok);
      assert.equal(firstTry.length, 1, JSON.stringify(firstTry));
      assert.deepEqual(firstTry[0]?.data, body.data);
      const id = firstTry[0]?.id as string;
      // While the key is broken, a retry fails the same way and changes nothing.
      expectFailedFor(await client.post('/v1/messages', body), bad);
      assert.deepEqual(await messagesOf(ok), firstTry);

      await repairInbox(bad);
      const retry = await client.post('/v1/messages', body);
      assert.equal(retry.status, 201, `201: the retry had to append: ${retry.text}`);
      const created = retry.body as Created;
      assert.deepEqual(created, {
        id, recipients: to.map((user) => ({ user, seq: 1 })), duplicate: false,
      });
      for (const user of to) {
        const inbox = await messagesOf(user);
        assert.deepEqual(inbox.map((m) => [m.seq, m.id]), [[1, id]], `${user} holds the message exactly once`);
        assert.deepEqual(inbox[0]?.data, body.data);
      }

      // Once complete, the same client_msg_id is a plain duplicate: 200, nothing appended.
      const again = await client.post('/v1/messages', body);
      assert.equal(again.status, 200, again.text);
      assert.deepEqual(again.body, { ...created, duplicate: true });
      for (const user of to) assert.deepEqual((await messagesOf(user)).map((m) => m.id), [id], user);
    });
  }
});

describe('a room message that fails for one of its members', () => {
  test('500; once repaired, the retry that appends it is 201 duplicate false, to the members it was first sent for, and only the next one is a 200 duplicate', async () => {
    const room = 'part-room';
    await addMembers(client, room, ['room-ok', 'room-bad']);
    await breakInbox('room-bad');
    const body = { room, client_msg_id: 'part-room-1' };
    expectFailedFor(await client.post('/v1/messages', { type: 'room.text', data: { text: 'hello room' }, ...body }), 'room-bad');
    const [firstTry] = await messagesOf('room-ok');
    await repairInbox('room-bad');
    const retry = await postRoom(client, body, { status: 201, recipients: 2 });
    assert.equal(retry.id, firstTry?.id);
    for (const user of ['room-ok', 'room-bad']) assert.deepEqual((await messagesOf(user)).map((m) => m.id), [retry.id], user);
    assert.deepEqual(await postRoom(client, body, { status: 200, recipients: 2 }), { ...retry, duplicate: true });
  });
});

describe('POST /v1/messages/batch with an item that fails for one of its recipients', () => {
  test('that item is 500 and the others are created; once repaired, resending the batch completes it and duplicates nothing', async () => {
    await breakInbox('bat-bad');
    const messages = [
      { to: 'bat-solo', type: 't', data: 1, client_msg_id: 'bat-1' },
      { to: ['bat-ok', 'bat-bad'], type: 't', data: 2, client_msg_id: 'bat-2' },
      { to: 'bat-ok', type: 't', data: 3, client_msg_id: 'bat-3' },
    ];
    type Item = { status: number; id?: string; recipients?: { user: string; seq: number }[]; duplicate?: boolean; error?: { code: string } };
    const first = await client.post('/v1/messages/batch', { messages });
    assert.equal(first.status, 200, first.text);
    const [solo, partial, later] = (first.body as { results: Item[] }).results as [Item, Item, Item];
    assert.equal(solo.status, 201);
    assert.deepEqual([partial.status, partial.error?.code], [500, 'INTERNAL'], JSON.stringify(partial));
    // No item to retry before the key is repaired: no Retry-After.
    assert.equal(first.headers.get('retry-after'), null);
    assert.equal(later.status, 201);
    // bat-ok got message 2 (seq 1) before message 3 (seq 2): batch order per recipient.
    assert.deepEqual(later.recipients, [{ user: 'bat-ok', seq: 2 }]);
    const okInbox = await messagesOf('bat-ok');
    assert.deepEqual(okInbox.map((m) => m.data), [2, 3]);
    const id = okInbox[0]?.id as string;

    await repairInbox('bat-bad');
    const second = await client.post('/v1/messages/batch', { messages });
    assert.equal(second.status, 200, second.text);
    const results = (second.body as { results: Item[] }).results;
    assert.deepEqual(results.map((r) => [r.status, r.duplicate]), [[200, true], [201, false], [200, true]]);
    assert.equal(second.headers.get('retry-after'), null, 'nothing to retry');
    assert.equal(results[1]?.id, id, 'the same message id');
    assert.deepEqual(results[1]?.recipients, [{ user: 'bat-ok', seq: 1 }, { user: 'bat-bad', seq: 1 }]);
    assert.deepEqual((await messagesOf('bat-ok')).map((m) => [m.seq, m.id]), [[1, id], [2, later.id]]);
    assert.deepEqual((await messagesOf('bat-bad')).map((m) => [m.seq, m.id]), [[1, id]]);
    assert.deepEqual((await messagesOf('bat-solo')).map((m) => m.id), [solo.id]);
  });
});

describe('a batch item that Redis fails', () => {
  test('is 503 with the batch\'s Retry-After, and counts once in pixiu_redis_errors_total{kind="request"}, as a POST it failed would, though the batch answers 200', async () => {
    const redisErrors = async (): Promise<number> =>
      metricSample((await client.get('/metrics')).text, 'pixiu_redis_errors_total{kind="request"}') ?? 0;
    const before = await redisErrors();
    // Redis not answering: the item's append times out (the default 2 s command timeout).
    redis.pause();
    let answer: HttpAnswer;
    try {
      answer = await client.post('/v1/messages/batch', { messages: [{ to: 'count-a', type: 't', data: 1 }] });
    } finally {
      redis.resume();
    }
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual((answer.body as { results: { status: number }[] }).results.map((r) => r.status), [503]);
    assert.equal(answer.headers.get('retry-after'), '1');
    assert.equal(await redisErrors() - before, 1);
  });
});

describe('a recipient online while the POST fails part-way', () => {
  test('gets the message at once from the append that went through, and not again from the retry', async (t) => {
    const ws = await TestClient.connect(server.service.url, { token: await testToken(server.service.secrets.jwt, 'live-ok'), params: { device: 'phone' } });
    t.after(() => ws.close());
    assert.equal((await ws.next()).t, 'welcome');
    await breakInbox('live-bad');
    const body = { to: ['live-ok', 'live-bad'], type: 't', data: { live: true }, client_msg_id: 'live-1' };
    expectFailedFor(await client.post('/v1/messages', body), 'live-bad');
    // Well before the first heartbeat pull (half the default 25 s period at the
    // earliest): only the append's own notify can bring it this soon.
    const [msg] = await ws.msgs(1, { timeoutMs: 5000 });
    assert.equal(msg?.seq, 1);
    assert.deepEqual(msg?.data, body.data);
    ws.ack(1);

    await repairInbox('live-bad');
    const retry = await client.post('/v1/messages', body);
    assert.equal(retry.status, 201, retry.text);
    assert.equal((retry.body as Created).id, msg?.id);
    // The next frame is the next message: the retry sent the first one no second time.
    const next = await client.post('/v1/messages', { to: 'live-ok', type: 't', data: { n: 2 } });
    assert.equal(next.status, 201, next.text);
    const frame = await ws.next(5000);
    assert.deepEqual([frame.t, frame.seq, frame.id], ['msg', 2, (next.body as Created).id]);
  });
});

describe('POST /v1/messages to one recipient whose append fails', () => {
  test('500; once repaired, the retry with the same client_msg_id that appends it is 201 duplicate false, and only the next one is a 200 duplicate', async () => {
    const user = 'bad-single';
    const body = { to: user, type: 'chat.text', data: { text: 'single' }, client_msg_id: 'partial-single' };
    await breakInbox(user);
    // Stored, not appended: the content is in the store, the inbox has nothing.
    expectFailedFor(await client.post('/v1/messages', body), user);

    await repairInbox(user);
    const retry = await client.post('/v1/messages', body);
    assert.equal(retry.status, 201, `201: the retry had to append: ${retry.text}`);
    const created = retry.body as Created;
    assert.equal(created.duplicate, false, 'the stored content alone does not make the retry a duplicate');
    assert.deepEqual(created.recipients, [{ user, seq: 1 }]);
    assert.deepEqual((await messagesOf(user)).map((m) => [m.seq, m.id]), [[1, created.id]]);

    const again = await client.post('/v1/messages', body);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, { ...created, duplicate: true });
    assert.deepEqual((await messagesOf(user)).map((m) => m.id), [created.id], 'nothing appended twice');
  });
});
