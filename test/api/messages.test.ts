/**
 * The success path of every message route (DESIGN.md §7) against the real service on
 * a real port and a private redis-server: what is answered, and what is then in the
 * inboxes (read through the Inbox class) and the store (read back over HTTP).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { INBOX_RETENTION_GRACE_MS, type Inbox } from '../../src/inbox/inbox.js';
import { Keys } from '../../src/redis/keys.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, startInProcess, type InProcessServer, type PixiuClient } from '../harness/pixiu-server.js';
import { expectError, openInbox, readWholeInbox } from '../harness/checks.js';

interface Created {
  id: string;
  recipients: { user: string; seq: number }[];
  duplicate: boolean;
}

let redis: RedisServer;
let server: InProcessServer;
let client: PixiuClient;
let inbox: Inbox;
let redisClient: Redis;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  // Registered first, so it runs last, and runs even when an earlier step fails.
  files.after(() => redis.destroy());
  server = await startInProcess(files, { redisUrl: redis.url });
  client = server.client;
  ({ inbox, redis: redisClient } = await openInbox(files, redis.url));
});

after(() => files.run());

/** Posts a message and asserts its status; returns the body. */
async function send(body: unknown, status = 201): Promise<Created> {
  const answer = await client.post('/v1/messages', body);
  assert.equal(answer.status, status, answer.text);
  return answer.body as Created;
}

test('POST /v1/messages to one user answers 201 with the id and the seq, and the inbox holds it', async () => {
  const created = await send({ to: 'ann', type: 'chat.text', data: { text: 'hi' } });
  assert.match(created.id, /^[0-9a-f]{16}$/);
  assert.deepEqual(created, { id: created.id, recipients: [{ user: 'ann', seq: 1 }], duplicate: false });
  const entries = await readWholeInbox(inbox, 'ann');
  assert.deepEqual(entries.map((e) => [e.seq, e.id]), [[1, created.id]]);
});

test('each recipient keeps its inbox keys until a day after the content it was sent expires', async () => {
  const keys = new Keys('px:');
  const expiry = async (user: string): Promise<number[]> =>
    Promise.all(Object.values(keys.user(user).toJSON()).filter((key) => !/:(conns|closed|replaced)$/.test(key)).map((key) => redisClient.pexpiretime(key)));
  const expiresAt = async (id: string): Promise<number> => ((await client.get(`/v1/messages/${id}`)).body as { expires_at: number }).expires_at;

  const one = await send({ to: 'kept-a', type: 't', data: 1, ttl: 3600 });
  await inbox.ack('kept-a', 'phone', 1);
  const oneKeep = (await expiresAt(one.id)) + INBOX_RETENTION_GRACE_MS;
  assert.deepEqual(await expiry('kept-a'), [oneKeep, oneKeep, oneKeep, oneKeep], 'inbox, meta, acks and ids');

  const many = await send({ to: ['kept-b', 'kept-c'], type: 't', data: 2, ttl: 7200 });
  const manyKeep = (await expiresAt(many.id)) + INBOX_RETENTION_GRACE_MS;
  for (const user of ['kept-b', 'kept-c']) assert.equal(await redisClient.pexpiretime(keys.inbox(user)), manyKeep, user);

  const batch = await client.post('/v1/messages/batch', { messages: [{ to: 'kept-d', type: 't', data: 3 }] });
  assert.equal(batch.status, 200, batch.text);
  const [item] = (batch.body as { results: Created[] }).results;
  const batchKeep = (await expiresAt(item?.id ?? '')) + INBOX_RETENTION_GRACE_MS;
  assert.equal(await redisClient.pexpiretime(keys.inbox('kept-d')), batchKeep, 'the default ttl, from a batch');
});

test('POST /v1/messages to a list stores once and appends to every recipient, repeats delivered once', async () => {
  await send({ to: 'lee', type: 't', data: 0 });
  const created = await send({ to: ['lee', 'max', 'lee', 'ned'], type: 'chat.text', from: 'ann', data: { n: 1 } });
  assert.deepEqual(created.recipients, [{ user: 'lee', seq: 2 }, { user: 'max', seq: 1 }, { user: 'ned', seq: 1 }]);
  assert.equal(created.duplicate, false);
  for (const { user, seq } of created.recipients) {
    const entries = await readWholeInbox(inbox, user);
    assert.deepEqual(entries.filter((e) => e.id === created.id).map((e) => e.seq), [seq], user);
  }
});

test('the same client_msg_id again answers 200 with the same id and seqs, duplicate true, and appends nothing', async () => {
  const body = { to: ['oli', 'pam'], type: 't', data: { v: 1 }, client_msg_id: 'dup-1' };
  const first = await send(body, 201);
  const again = await send(body, 200);
  assert.deepEqual(again, { ...first, duplicate: true });
  // The recipients in another order, or data with its keys in another order, are the same message.
  assert.deepEqual(await send({ ...body, to: ['pam', 'oli'] }, 200), { ...first, duplicate: true });
  const nested = { to: 'quip', type: 't', data: { x: 1, y: [1, { a: 1, b: 2 }] }, client_msg_id: 'dup-order' };
  const stored = await send(nested, 201);
  assert.deepEqual(await send({ ...nested, data: { y: [1, { b: 2, a: 1 }], x: 1 } }, 200), { ...stored, duplicate: true });
  const reordered = await client.post('/v1/messages', { ...nested, data: { x: 1, y: [{ a: 1, b: 2 }, 1] } });
  expectError(reordered, 409, 'CONFLICT', /dup-order/);
  // Another message under the same client_msg_id is refused, not answered as the first:
  // fewer recipients (a subset of the first's) as much as more, or as many with one other.
  for (const other of [{ to: 'zed' }, { to: ['oli', 'pam', 'zed'] }, { to: 'oli' }, { to: ['oli', 'zed'] }, { to: ['pam', 'pam'] }, { data: { v: 2 } }, { type: 'u' }, { from: 'ann' }]) {
    const answer = await client.post('/v1/messages', { ...body, ...other });
    expectError(answer, 409, 'CONFLICT', /client_msg_id "dup-1" was first used for another message/);
    assert.match(answer.text, new RegExp(first.id));
  }
  // A retry whose body was rebuilt (walk26 L3) is told that the first attempt was stored,
  // and to send the very same body: not a new key, which would deliver it twice.
  const rebuilt = await client.post('/v1/messages', { ...body, data: { ...body.data as object, sent_at: '2' } });
  expectError(rebuilt, 409, 'CONFLICT', new RegExp(`^client_msg_id "dup-1" was first used for another message \\(${first.id}: its recipients or room, type, from or data differ\\); `
    + `nothing was appended\\. If this is a retry of that message, it was stored as ${first.id}: to retry, send the very same body; `
    + 'a new client_msg_id is for a different message$'));
  for (const user of ['oli', 'pam']) {
    assert.deepEqual((await readWholeInbox(inbox, user)).map((e) => e.id), [first.id], user);
  }
  assert.deepEqual(await readWholeInbox(inbox, 'zed'), []);
  // One store on this Redis: its own index is the whole story, no claim is written
  // (src/cluster/client-id-claims.ts: a single node pays no round trip for it).
  assert.deepEqual(await redisClient.keys('px:cmid:*'), []);
});

test('a retry whose data holds -0 (stored as 0) is the same message: data is compared as the JSON value it is stored as', async () => {
  // Sent as text: JSON.stringify would write -0 as 0. JSON.parse reads -0 and -0.0 as
  // the number -0, which the store keeps as 0; the retry of the very same body must
  // not be told it is another message.
  const text = '{"to":"neg-zero","type":"t","data":{"z":-0,"list":[-0.0,1.0]},"client_msg_id":"neg-zero-1"}';
  const first = await client.post('/v1/messages', text);
  assert.equal(first.status, 201, first.text);
  const again = await client.post('/v1/messages', text);
  assert.equal(again.status, 200, again.text);
  assert.deepEqual(again.body, { ...(first.body as object), duplicate: true });
  assert.deepEqual((await readWholeInbox(inbox, 'neg-zero')).map((e) => e.id), [(first.body as { id: string }).id]);
});

test('POST /v1/messages/batch answers per item in order; an invalid item fails alone with its code', async () => {
  const answer = await client.post('/v1/messages/batch', {
    messages: [
      { to: 'quinn', type: 't', data: 1, client_msg_id: 'b-1' },
      { to: 'quinn', type: 'x'.repeat(65), data: 2 },
      { to: ['quinn', 'rae'], type: 't', data: 3 },
      { to: 'quinn', type: 't', data: 'y'.repeat(65 * 1024) },
      { to: 'quinn', type: 't', data: 1, client_msg_id: 'b-1' },
      { room: 'lobby', type: 't', data: 5 },
      'not an object',
      { to: 'quinn', type: 't', data: 4, client_msg_id: 'b-1' },
    ],
  });
  assert.equal(answer.status, 200, answer.text);
  const { results } = answer.body as { results: Array<{ status: number; id?: string; error?: { code: string; message: string } }> };
  assert.deepEqual(results.map((r) => r.status), [201, 400, 201, 413, 200, 404, 400, 409]);
  assert.deepEqual(results.map((r) => r.error?.code), [undefined, 'INVALID_REQUEST', undefined, 'PAYLOAD_TOO_LARGE', undefined, 'NOT_FOUND', 'INVALID_REQUEST', 'CONFLICT']);
  assert.match(results[1]?.error?.message ?? '', /messages\/1\/type/);
  // Named by its place as the other refusals of an item are (docs/api.md "Errors").
  assert.match(results[3]?.error?.message ?? '', /^messages\/3: message is \d+ bytes \(the UTF-8 JSON of \{type, data\}; a from would count too\), over the limit of 65536 bytes/);
  assert.match(results[5]?.error?.message ?? '', /no room lobby/);
  assert.match(results[6]?.error?.message ?? '', /messages\/6/);
  assert.equal(results[4]?.id, results[0]?.id, 'the repeated client_msg_id answers the first id');
  const quinn = await readWholeInbox(inbox, 'quinn');
  assert.deepEqual(quinn.map((e) => e.id), [results[0]?.id, results[2]?.id]);
  assert.deepEqual((await readWholeInbox(inbox, 'rae')).map((e) => e.id), [results[2]?.id]);
});

test('a batch\'s messages to one user land in their inbox in batch order', async () => {
  // Distinct client_msg_ids spread the messages over every store partition, whose
  // writes finish in any order; the inbox order must still be the batch's.
  const messages = Array.from({ length: 60 }, (_, i) => ({ to: ['val', `other-${i % 7}`], type: 't', data: { i }, client_msg_id: `order-${i}` }));
  const answer = await client.post('/v1/messages/batch', { messages });
  assert.equal(answer.status, 200, answer.text);
  const { results } = answer.body as { results: Array<{ status: number; id: string }> };
  assert.ok(results.every((r) => r.status === 201));
  assert.deepEqual((await readWholeInbox(inbox, 'val')).map((e) => e.id), results.map((r) => r.id));
});

test('GET /v1/messages/{id} answers the record and, per recipient, its seq and the devices that acked it', async () => {
  await send({ to: 'sam', type: 't', data: 0 });
  const created = await send({ to: ['sam', 'tia'], from: 'ann', type: 'chat.text', data: { text: 'héllo 👋' }, client_msg_id: 'get-1', ttl: 60 });
  const samSeq = created.recipients[0]?.seq ?? 0;
  assert.equal(samSeq, 2);
  await inbox.ack('sam', 'phone', samSeq);
  await inbox.ack('sam', 'laptop', samSeq + 5);
  await inbox.ack('sam', 'tablet', samSeq - 1);
  const answer = await client.get(`/v1/messages/${created.id}`);
  assert.equal(answer.status, 200, answer.text);
  const record = answer.body as Record<string, unknown>;
  assert.equal(typeof record.ts, 'number');
  assert.equal(record.expires_at, (record.ts as number) + 60_000);
  assert.deepEqual(record, {
    id: created.id, kind: 'user', type: 'chat.text', from: 'ann', ts: record.ts, expires_at: record.expires_at,
    client_msg_id: 'get-1', data: { text: 'héllo 👋' },
    recipients: [
      { user: 'sam', seq: 2, acked_by: ['laptop', 'phone'] },
      { user: 'tia', seq: 1, acked_by: [] },
    ],
  });
  expectError(await client.get('/v1/messages/0001000000fffff0'), 404, 'NOT_FOUND');
});

test('GET /v1/messages/{id} gives seq null, no acks, for a recipient whose inbox entry was deleted by hand (XDEL), as history shows it as a gap', async () => {
  await send({ to: 'xdel-a', type: 't', data: 1 });
  const created = await send({ to: ['xdel-a', 'xdel-b'], type: 't', data: 2 });
  await send({ to: 'xdel-a', type: 't', data: 3 });
  await inbox.ack('xdel-a', 'phone', 3);
  assert.equal(await redisClient.xdel(new Keys('px:').user('xdel-a').inbox, '2-0'), 1);
  const answer = await client.get(`/v1/messages/${created.id}`);
  assert.equal(answer.status, 200, answer.text);
  assert.deepEqual((answer.body as { recipients: unknown }).recipients, [
    { user: 'xdel-a', seq: null, acked_by: [] },
    { user: 'xdel-b', seq: 1, acked_by: [] },
  ]);
  const history = await client.get('/v1/users/xdel-a/messages');
  assert.deepEqual((history.body as { gaps: unknown }).gaps, [{ from: 2, to: 2, reason: 'trimmed' }], 'history shows seq 2 as a gap (deleted by hand: trimmed)');
});

test('GET /v1/users/{uid}/messages pages through the inbox with epoch, bounds and seqs', async () => {
  const ids: string[] = [];
  for (let i = 1; i <= 5; i++) ids.push((await send({ to: 'uma', type: 't', data: { i } })).id);
  const page = async (query: string): Promise<Record<string, unknown>> => {
    const answer = await client.get(`/v1/users/uma/messages${query}`);
    assert.equal(answer.status, 200, answer.text);
    return answer.body as Record<string, unknown>;
  };
  const first = await page('?after_seq=0&limit=2');
  assert.match(String(first.epoch), /^[A-Za-z0-9_-]{12}$/);
  assert.equal(first.first_seq, 1);
  assert.equal(first.latest_seq, 5);
  assert.deepEqual(first.messages, [
    { seq: 1, id: ids[0], type: 't', ts: (first.messages as { ts: number }[])[0]?.ts, data: { i: 1 } },
    { seq: 2, id: ids[1], type: 't', ts: (first.messages as { ts: number }[])[1]?.ts, data: { i: 2 } },
  ]);
  assert.equal(first.next_after_seq, 2);
  const second = await page('?after_seq=2&limit=2');
  assert.deepEqual((second.messages as { seq: number }[]).map((m) => m.seq), [3, 4]);
  assert.equal(second.epoch, first.epoch);
  const last = await page('?after_seq=4');
  assert.deepEqual((last.messages as { id: string }[]).map((m) => m.id), [ids[4]]);
  const all = await page('');
  assert.deepEqual((all.messages as { id: string }[]).map((m) => m.id), ids, 'default: from the oldest, up to 100');
  const past = await page('?after_seq=5');
  assert.deepEqual(past.messages, []);
  assert.equal(past.latest_seq, 5);

  expectError(await client.get('/v1/users/uma/messages?limit=1001'), 400, 'INVALID_REQUEST', /limit/);
  expectError(await client.get('/v1/users/uma/messages?limit=0'), 400, 'INVALID_REQUEST', /limit/);
  expectError(await client.get('/v1/users/uma/messages?after_seq=-1'), 400, 'INVALID_REQUEST', /after_seq/);
});

test('GET /v1/users/{uid}/messages of a user who never got anything is an empty page with epoch null', async () => {
  const answer = await client.get('/v1/users/nobody-here/messages');
  assert.equal(answer.status, 200, answer.text);
  assert.deepEqual(answer.body, {
    user: 'nobody-here', epoch: null, first_seq: 1, latest_seq: 0, messages: [], gaps: [], next_after_seq: 0,
  });
});

test('20 concurrent identical POSTs with one client_msg_id give one MsgID and one inbox entry per recipient', async () => {
  const users = ['vic', 'wes', 'xia'];
  const body = { to: users, type: 't', data: { race: true }, client_msg_id: 'race-1' };
  const answers = await Promise.all(Array.from({ length: 20 }, () => client.post('/v1/messages', body)));
  const bodies = answers.map((a) => a.body as Created);
  const ids = new Set(bodies.map((b) => b.id));
  assert.equal(ids.size, 1, `one MsgID: ${[...ids].join(', ')}`);
  assert.ok(answers.every((a) => a.status === 200 || a.status === 201), answers.map((a) => a.status).join());
  for (const b of bodies) assert.deepEqual(b.recipients, bodies[0]?.recipients);
  // The request whose put stored the message appends first (its continuation runs
  // before any duplicate's, and all appends share one Redis connection in order), so
  // it alone did new work: exactly one 201, nineteen 200 duplicates.
  assert.equal(answers.filter((a) => a.status === 201).length, 1);
  assert.equal(bodies.filter((b) => b.duplicate).length, 19);
  const [id] = ids;
  for (const user of users) {
    const entries = await readWholeInbox(inbox, user);
    assert.deepEqual(entries.map((e) => e.id), [id], user);
  }
});
