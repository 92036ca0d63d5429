/**
 * A room whose key in Redis has another type than Pixiu writes there (an operator's
 * `SET 'px:room:{lobby}:members' x`): every membership call on it and every message to
 * it fails with Redis's WRONGTYPE, and no retry cures it. Answered 500 INTERNAL naming
 * the room, never a 503 "retry later" (a reviewer's finding, F2: a producer retried
 * for ever, nothing naming the key); logged at error with every request it fails,
 * naming the room, the key, its type and the expected one; a batch item to it fails
 * alone, the batch's other items are created (docs/api.md, "Errors", 500;
 * src/redis/wrong-type.ts). As test/api/wrong-type-key.test.ts does for inbox keys:
 * the real service in this process on a private redis-server, its log captured.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Keys } from '../../src/redis/keys.js';
import { errorLinesFrom, wrongTypeService, type WrongTypeLine } from '../harness/wrong-type-service.js';

const PREFIX = 'wr:';
const keys = new Keys(PREFIX);
const started = wrongTypeService(PREFIX);

/** Asserts a 500 INTERNAL, without Retry-After, whose message names `room` and says what to do. */
function expectWrongType(answer: { status: number; headers?: Headers; body: unknown }, room: string): void {
  assert.equal(answer.status, 500, JSON.stringify(answer.body));
  assert.equal(answer.headers?.get('retry-after') ?? null, null, 'nothing to retry until it is repaired');
  const { error } = answer.body as { error: { code: string; message: string } };
  assert.equal(error.code, 'INTERNAL');
  assert.equal(error.message, `internal error: room "${room}" cannot be used: a key of it in Redis holds another type (WRONGTYPE), `
    + 'which an operator must delete or repair (the node\'s log names it)');
}

/** The error lines logged since `from` with message `msg`. */
function errorLines(from: number, msg: string): WrongTypeLine[] {
  return errorLinesFrom(started().lines, from, msg);
}

test('a room whose members key is a string: PUT, GET and DELETE of its members and a message to it are each 500 naming the room, logged at error with the key; after DEL all work', async () => {
  const { client, raw, lines } = started();
  const room = 'wr-lobby';
  const members = keys.roomMembers(room);
  assert.equal(await raw.set(members, 'oops'), 'OK');
  const from = lines.length;
  expectWrongType(await client.request('PUT', `/v1/rooms/${room}/members`, { body: { users: ['wr-a'] } }), room);
  expectWrongType(await client.get(`/v1/rooms/${room}/members`), room);
  expectWrongType(await client.request('DELETE', `/v1/rooms/${room}/members`, { body: { users: ['wr-a'] } }), room);
  expectWrongType(await client.post('/v1/messages', { room, type: 't', data: 1, client_msg_id: 'wr-1' }), room);

  // One error line per request, not thinned as an outage's warnings are.
  const logged = errorLines(from, 'request failed');
  assert.equal(logged.length, 4, JSON.stringify(lines.slice(from)));
  for (const line of logged) {
    assert.equal(line.code, 'INTERNAL');
    assert.equal(line.err.room, room);
    assert.deepEqual(line.err.keys, [{ key: members, type: 'string', expected: 'zset' }]);
    assert.match(line.err.message, /^WRONGTYPE: room "wr-lobby"'s key in Redis has another type than Pixiu writes there: wr:room:\{wr-lobby\}:members \(a string, not a zset\)\. Membership changes and listings of the room and messages to it fail until an operator deletes or repairs it/);
  }
  assert.equal(lines.slice(from).filter((l) => l.level === 40).length, 0, 'no outage warning');

  assert.equal(await raw.del(members), 1);
  const put = await client.request('PUT', `/v1/rooms/${room}/members`, { body: { users: ['wr-a'] } });
  assert.equal(put.status, 200, put.text);
  assert.equal((await client.get(`/v1/rooms/${room}/members`)).status, 200);
  const sent = await client.post('/v1/messages', { room, type: 't', data: 1, client_msg_id: 'wr-1' });
  assert.equal(sent.status, 201, sent.text);
});

test('a room whose cut key is a list: a message to it is 500 naming the room and the cut key; a batch item to it fails alone, the others are created', async () => {
  const { client, raw, lines } = started();
  const room = 'wr-cut';
  assert.equal((await client.request('PUT', `/v1/rooms/${room}/members`, { body: { users: ['wr-b'] } })).status, 200);
  const cut = keys.roomCut(room);
  await raw.del(cut);
  assert.equal(await raw.rpush(cut, 'not a string'), 1);
  let from = lines.length;
  expectWrongType(await client.post('/v1/messages', { room, type: 't', data: 1 }), room);
  assert.deepEqual(errorLines(from, 'request failed')[0]?.err.keys, [{ key: cut, type: 'list', expected: 'string' }]);

  // A batch: its room item fails alone, before anything of it is stored.
  const broken = 'wr-broken';
  assert.equal(await raw.set(keys.roomMembers(broken), 'oops'), 'OK');
  from = lines.length;
  const batch = await client.post('/v1/messages/batch', { messages: [
    { to: 'wr-c', type: 't', data: 1 },
    { room: broken, type: 't', data: 2 },
    { room, type: 't', data: 3 },
    { to: 'wr-c', type: 't', data: 4 },
  ] });
  assert.equal(batch.status, 200, batch.text);
  assert.equal(batch.headers.get('retry-after'), null);
  const results = (batch.body as { results: Array<{ status: number; error?: { code: string; message: string } }> }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 500, 500, 201]);
  expectWrongType({ status: results[1]?.status ?? 0, body: { error: results[1]?.error } }, broken);
  expectWrongType({ status: results[2]?.status ?? 0, body: { error: results[2]?.error } }, room);
  const items = errorLines(from, 'batch item failed');
  assert.deepEqual(items.map((l) => [l.item, l.err.keys]), [
    [1, [{ key: keys.roomMembers(broken), type: 'string', expected: 'zset' }]],
    [2, [{ key: cut, type: 'list', expected: 'string' }]],
  ]);
  assert.equal(await raw.del(cut, keys.roomMembers(broken)), 2);
  assert.equal((await client.post('/v1/messages', { room, type: 't', data: 5 })).status, 201);
});
