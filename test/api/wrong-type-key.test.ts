/**
 * A recipient whose inbox key in Redis has another type than Pixiu writes there (an
 * operator's `SET 'px:{u}:meta' x`): every append to that user fails with Redis's
 * WRONGTYPE, and no retry cures it. Answered 500 INTERNAL naming the user, never a 503
 * "retry later" (a reviewer's finding: a producer retried for ever); logged at error
 * with every request it fails, naming the user, the key and WRONGTYPE; the message's
 * other recipients get it once, and once the key is deleted a retry with the same
 * `client_msg_id` completes it (docs/api.md, "Errors", 500). Reads of such a user's
 * inbox (history, `GET /v1/messages/{id}`, a device's delivery) are 500s naming it
 * too, and a delivery's stall lines name the key: before, they were 503 "retry later".
 * The real service in this process on a private redis-server, its log captured.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { Keys } from '../../src/redis/keys.js';
import { startService, type Service } from '../../src/service/service.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, PixiuClient, tempDataDir, type HttpAnswer } from '../harness/pixiu-server.js';
import { openInbox } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { Refused, TestClient, testToken } from '../harness/ws-client.js';
import { waitUntil } from '../harness/checks.js';
import { FETCH_FAILED_LOG } from '../../src/delivery/stall-log.js';

const PREFIX = 'wt:';
const keys = new Keys(PREFIX);
let client: PixiuClient;
let raw: Redis;
let lines: LogLine[];
let service: Service;
const files = cleanupList();

before(async () => {
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  const dataDir = await tempDataDir(files);
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir, redisUrl: redis.url, redisPrefix: PREFIX });
  const captured = capturingLogger();
  lines = captured.lines;
  service = await startService(config, captured.logger);
  files.after(() => service.close());
  client = new PixiuClient(service.url, service.secrets.apiToken);
  ({ redis: raw } = await openInbox(files, redis.url, PREFIX));
});

after(() => files.run());

/** The ids in `user`'s inbox, in seq order, through `GET /v1/users/{uid}/messages`. */
async function inboxOf(user: string): Promise<string[]> {
  const answer = await client.get(`/v1/users/${user}/messages`);
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { messages: { id: string }[] }).messages.map((m) => m.id);
}

/** Asserts a 500 INTERNAL, without Retry-After, whose message names `user` and says what to do. */
function expectWrongType(answer: { status: number; headers?: Headers; body: unknown }, user: string, use: 'written' | 'read' = 'written'): void {
  assert.equal(answer.status, 500, JSON.stringify(answer.body));
  assert.equal(answer.headers?.get('retry-after') ?? null, null, 'nothing to retry until it is repaired');
  const { error } = answer.body as { error: { code: string; message: string } };
  assert.equal(error.code, 'INTERNAL');
  assert.match(error.message, new RegExp(`^internal error: user "${user}"'s inbox cannot be ${use}: a key of it in Redis holds another type \\(WRONGTYPE\\), which an operator must delete or repair \\(the node's log names it\\)${use === 'read' ? '$' : '\\. Any other'}`));
}

/** The error lines logged since `from` with message `msg`, with their cause as the err serializer wrote it. */
function errorLines(from: number, msg: string): Array<LogLine & { err: { message: string; user: string; keys: Array<{ key: string; type: string; expected: string }> } }> {
  return lines.slice(from).filter((l) => l.level === 50 && l.msg === msg) as Array<LogLine & { err: { message: string; user: string; keys: Array<{ key: string; type: string; expected: string }> } }>;
}

test('a message to a user whose meta key is a string: 500 naming the user, every time, each logged at error with the key; the other recipient gets it once; after DEL the retry completes it', async () => {
  const meta = keys.meta('wt-bad');
  assert.equal(await raw.set(meta, 'x'), 'OK');
  const body = { to: ['wt-ok', 'wt-bad'], type: 't', data: { n: 1 }, client_msg_id: 'wt-1' };
  const from = lines.length;
  const answers: HttpAnswer[] = [];
  for (let i = 0; i < 3; i++) answers.push(await client.post('/v1/messages', body));
  for (const answer of answers) expectWrongType(answer, 'wt-bad');
  // The healthy recipient has it once, from the first attempt; the retries appended nothing more.
  const okInbox = await inboxOf('wt-ok');
  assert.equal(okInbox.length, 1);

  // One error line per request, not thinned to one per 10 s as outages are.
  const logged = errorLines(from, 'request failed');
  assert.equal(logged.length, 3, JSON.stringify(lines.slice(from)));
  for (const line of logged) {
    assert.equal(line.code, 'INTERNAL');
    assert.equal(line.err.user, 'wt-bad');
    assert.deepEqual(line.err.keys, [{ key: meta, type: 'string', expected: 'hash' }]);
    assert.match(line.err.message, /^WRONGTYPE: user "wt-bad"'s inbox key in Redis has another type than Pixiu writes there: wt:\{wt-bad\}:meta \(a string, not a hash\)\. Appends to the user and reads of its inbox fail until an operator deletes or repairs it/);
  }
  assert.equal(lines.slice(from).filter((l) => l.level === 40).length, 0, 'no outage warning');

  assert.equal(await raw.del(meta), 1);
  const retry = await client.post('/v1/messages', body);
  assert.equal(retry.status, 201, retry.text);
  const id = (retry.body as { id: string }).id;
  assert.deepEqual(okInbox, [id], 'the same message id');
  // Each failed attempt's line names what the producer knows of it (walk26 L1): its key, and the message it stored.
  for (const line of logged) assert.deepEqual([line.method, line.route, line.clientMsgId, line.msgId], ['POST', '/v1/messages', 'wt-1', id]);
  assert.deepEqual(await inboxOf('wt-ok'), [id], 'wt-ok holds it exactly once');
  assert.deepEqual(await inboxOf('wt-bad'), [id]);
});

test('a message to that user alone, a room message to it and a batch item naming it: each 500 naming it, logged at error; the batch\'s other items are created and it carries no Retry-After', async () => {
  const inbox = keys.inbox('wt-solo');
  assert.equal(await raw.rpush(inbox, 'not a stream'), 1);
  const from = lines.length;
  expectWrongType(await client.post('/v1/messages', { to: 'wt-solo', type: 't', data: 1 }), 'wt-solo');
  assert.equal((await client.request('PUT', '/v1/rooms/wt-room/members', { body: { users: ['wt-member', 'wt-solo'] } })).status, 200);
  expectWrongType(await client.post('/v1/messages', { room: 'wt-room', type: 't', data: 2 }), 'wt-solo');
  assert.equal((await inboxOf('wt-member')).length, 1, 'the other member has it');

  const batch = await client.post('/v1/messages/batch', { messages: [
    { to: 'wt-other', type: 't', data: 3 },
    { to: ['wt-other', 'wt-solo'], type: 't', data: 4, client_msg_id: 'wt-item' },
    { to: 'wt-other', type: 't', data: 5 },
  ] });
  assert.equal(batch.status, 200, batch.text);
  assert.equal(batch.headers.get('retry-after'), null);
  const results = (batch.body as { results: Array<{ status: number; error?: { code: string; message: string } }> }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 500, 201]);
  expectWrongType({ status: results[1]?.status ?? 0, body: { error: results[1]?.error } }, 'wt-solo');
  assert.equal((await inboxOf('wt-other')).length, 3, 'items 1–3 reached wt-other, in order');

  const requests = errorLines(from, 'request failed');
  const items = errorLines(from, 'batch item failed');
  assert.equal(requests.length, 2);
  assert.equal(items.length, 1);
  assert.equal(items[0]?.item, 1);
  assert.deepEqual([items[0]?.route, items[0]?.clientMsgId], ['/v1/messages/batch', 'wt-item']);
  assert.match(String(items[0]?.msgId), /^[0-9a-f]{16}$/, 'the id it was stored as');
  for (const line of [...requests, ...items]) assert.deepEqual(line.err.keys, [{ key: inbox, type: 'list', expected: 'stream' }]);
  assert.equal(await raw.del(inbox), 1);
});

test('reads of a user one of whose keys has the wrong type: history and GET /v1/messages/{id} are 500 naming it, logged at error with the key; a device\'s delivery stall names the key; once deleted, all read again', async () => {
  const user = 'wt-reader';
  const posted = await client.post('/v1/messages', { to: [user, 'wt-friend'], type: 't', data: 1 });
  assert.equal(posted.status, 201, posted.text);
  const id = (posted.body as { id: string }).id;

  // The ack cursors' hash a string: GET /v1/messages/{id} reads it for each recipient.
  const acks = keys.acks(user);
  assert.equal(await raw.set(acks, 'x'), 'OK');
  let from = lines.length;
  expectWrongType(await client.get(`/v1/messages/${id}`), user, 'read');
  const located = errorLines(from, 'request failed');
  assert.equal(located.length, 1, JSON.stringify(lines.slice(from)));
  assert.deepEqual(located[0]?.err.keys, [{ key: acks, type: 'string', expected: 'hash' }]);
  assert.equal(await raw.del(acks), 1);
  assert.equal((await client.get(`/v1/messages/${id}`)).status, 200);

  // The inbox stream a list: history reads it.
  const inbox = keys.inbox(user);
  assert.equal(await raw.del(inbox), 1);
  assert.equal(await raw.rpush(inbox, 'not a stream'), 1);
  from = lines.length;
  expectWrongType(await client.get(`/v1/users/${user}/messages`), user, 'read');
  assert.deepEqual(errorLines(from, 'request failed')[0]?.err.keys, [{ key: inbox, type: 'list', expected: 'stream' }]);
  assert.equal(lines.slice(from).filter((l) => l.level === 40).length, 0, 'no outage warning');

  // A device connecting: its delivery stalls (nothing can be read), each line naming the key.
  from = lines.length;
  const device = await TestClient.connect(service.url, { token: await testToken(service.secrets.jwt, user), params: { device: 'phone' } });
  try {
    await waitUntil('a stall line', async () => lines.slice(from).some((l) => l.msg === FETCH_FAILED_LOG), 5000);
    const stall = lines.slice(from).find((l) => l.msg === FETCH_FAILED_LOG) as LogLine & { reason: string; cause: string; user: string };
    assert.equal(stall.user, user);
    assert.match(stall.reason, new RegExp(`^internal error: user "${user}"'s inbox cannot be read`));
    assert.match(stall.cause, /wt:\{wt-reader\}:inbox \(a list, not a stream\)/);
  } finally {
    await device.close();
  }
  assert.equal(await raw.del(inbox), 1);
  assert.equal((await client.get(`/v1/users/${user}/messages`)).status, 200);
});

test('a handshake of a device with no last_seq, whose ack cursors\' key has the wrong type, is refused 500 naming the user (its cursor read), logged at error with the key', async () => {
  const user = 'wt-handshake';
  const acks = keys.acks(user);
  assert.equal(await raw.set(acks, 'x'), 'OK');
  const from = lines.length;
  const refusal = await TestClient.connect(service.url, { token: await testToken(service.secrets.jwt, user), params: { device: 'phone' } }).then(
    async (ws) => { await ws.close(); return assert.fail('the handshake connected'); },
    (err: unknown) => err,
  );
  assert.ok(refusal instanceof Refused, String(refusal));
  expectWrongType({ status: refusal.status, headers: refusal.headers, body: refusal.body }, user, 'read');
  assert.ok(lines.slice(from).some((l) => l.level === 50 && JSON.stringify(l).includes(`${acks} (a string, not a hash)`)), JSON.stringify(lines.slice(from)));
  assert.equal(await raw.del(acks), 1);
  const device = await TestClient.connect(service.url, { token: await testToken(service.secrets.jwt, user), params: { device: 'phone' } });
  await device.close();
});
