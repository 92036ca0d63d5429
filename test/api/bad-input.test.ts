/**
 * Every kind of bad input to the HTTP API gets its exact status and error code in
 * the JSON error body of DESIGN.md §7, and stores nothing.
 *
 * The cases of each test run against a fresh service with one store partition and its
 * own Redis key prefix. Every bad message names `alice` among its recipients; after the
 * test's rejections a good message to `alice` must be the store's first (MsgID counter
 * one past the time floor the service's start applied) and her inbox's first (seq 1),
 * and her inbox must hold only it: any one of them that stored something fails it. The
 * checks that look at no such first (an answer's status and body, a valid message
 * accepted) share one service, started once (each start is ~0.35 s of CPU); none of
 * them reads what another one wrote.
 */
import { after, before, test, type TestContext } from 'node:test';
import { gzipSync } from 'node:zlib';
import assert from 'node:assert/strict';
import type { ConfigOverrides } from '../../src/config/config.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, startInProcess, type HttpAnswer, type InProcessServer, type PixiuClient } from '../harness/pixiu-server.js';
import { assertFirstMinted, expectError, openInbox, readWholeInbox } from '../harness/checks.js';

const RECIPIENT = 'alice';

const cleanup = cleanupList();
let redis: RedisServer;
let prefixes = 0;
let shared: Promise<InProcessServer> | undefined;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
});

after(() => cleanup.run());

/** A fresh service: one partition, its own key prefix. */
async function freshServer(t: TestContext, overrides: ConfigOverrides = {}): Promise<InProcessServer> {
  return startInProcess(t, { redisUrl: redis.url, partitions: '1', redisPrefix: `bad${++prefixes}:`, ...overrides });
}

/**
 * The file's one shared service (as {@link freshServer}'s, started at its first use),
 * for checks that need no fresh one: no "nothing stored" check, no count of what a
 * user's inbox holds beyond what the test itself sent to a user of its own.
 */
function sharedServer(): Promise<InProcessServer> {
  shared ??= startInProcess(cleanup, { redisUrl: redis.url, partitions: '1', redisPrefix: 'bad-shared:' });
  return shared;
}

/** Asserts that nothing was stored or appended before: the next good message is the first. */
async function assertNothingStored(t: TestContext, server: InProcessServer): Promise<void> {
  const good = await server.client.post('/v1/messages', { to: RECIPIENT, type: 't', data: 'good' });
  assert.equal(good.status, 201, good.text);
  const body = good.body as { id: string; recipients: unknown };
  assertFirstMinted(body.id, 'the store holds nothing before the good message', server);
  assert.deepEqual(body.recipients, [{ user: RECIPIENT, seq: 1 }]);
  const { inbox } = await openInbox(t, redis.url, server.config.redisPrefix);
  assert.deepEqual((await readWholeInbox(inbox, RECIPIENT)).map((e) => e.id), [body.id]);
}

/** A bad request (how it is sent) and the error it must get: status, code, message. */
type Rejection = [send: (client: PixiuClient) => Promise<HttpAnswer>, status: number, code: string, message?: RegExp];

/**
 * Rejection cases of one test: sends each in turn to one fresh service, checks each
 * error body, then that nothing was stored by any of them (one stored would make the
 * good message not the first).
 */
async function rejectsEach(t: TestContext, cases: readonly Rejection[], overrides: ConfigOverrides = {}): Promise<HttpAnswer[]> {
  const server = await freshServer(t, overrides);
  const answers: HttpAnswer[] = [];
  for (const [send, status, code, message] of cases) {
    const answer = await send(server.client);
    expectError(answer, status, code, message);
    answers.push(answer);
  }
  await assertNothingStored(t, server);
  return answers;
}

/** One rejection case: {@link rejectsEach} with one. */
async function rejects(
  t: TestContext,
  send: (client: PixiuClient) => Promise<HttpAnswer>,
  status: number, code: string, message?: RegExp,
  overrides: ConfigOverrides = {},
): Promise<HttpAnswer> {
  const [answer] = await rejectsEach(t, [[send, status, code, message]], overrides);
  return answer as HttpAnswer;
}

/** A valid message to `alice` with `change` applied. */
function message(change: Record<string, unknown> = {}): Record<string, unknown> {
  return { to: [RECIPIENT, 'bob'], type: 'chat.text', data: { text: 'hello' }, ...change };
}

const post = (body: unknown) => (c: PixiuClient) => c.post('/v1/messages', body);

test('the check that nothing was stored takes only the first id past the start\'s time floor: not the second, not the 65th', async (t) => {
  const server = await freshServer(t);
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    const answer = await server.client.post('/v1/messages', { to: RECIPIENT, type: 't', data: i });
    assert.equal(answer.status, 201, answer.text);
    ids.push((answer.body as { id: string }).id);
  }
  const [first = '', second = ''] = ids;
  assertFirstMinted(first, 'the first', server);
  assert.throws(() => assertFirstMinted(second, 'the second', server), /the second: counter \d+ is not the first past the start's time floor/);
  // Seen from a floor one ms (64 counters) lower, the first id is the 65th: still refused.
  const floor = server.service.timeFloor ?? 0;
  assert.throws(() => assertFirstMinted(first, 'the 65th', { ...server, service: { ...server.service, timeFloor: floor - 64 } }), /is not the first past/);
  // A floor that is not the clock's while the service started is refused as such.
  assert.throws(() => assertFirstMinted(first, 'late', { ...server, startedBetween: { from: server.startedBetween.to + 1000, to: server.startedBetween.to + 2000 } }),
    /is not the clock's during the start/);
});

test('invalid JSON is 400 INVALID_REQUEST, with the parser\'s cause and where it stopped', async (t) => {
  await rejectsEach(t, [
    [post('{"to": "alice", "type": "t", "data": 1,}'), 400, 'INVALID_REQUEST',
      /^the body is not valid JSON: expected double-quoted property name at byte 39 \(near "… \\"t\\", \\"data\\": 1,}"\)$/],
    // V8 names no place for an unexpected token, nor anything for a body that is one bad word.
    [post('to=bob'), 400, 'INVALID_REQUEST', /^the body is not valid JSON: unexpected token 'to' at byte 0 \(near "to=bob"\)$/],
    [post('NaN'), 400, 'INVALID_REQUEST', /^the body is not valid JSON: unexpected token 'NaN' at byte 0 \(near "NaN"\)$/],
  ]);
});

test('a text/plain body is 415 UNSUPPORTED_MEDIA_TYPE', async (t) => {
  await rejectsEach(t, [
    [(c) => c.request('POST', '/v1/messages', {
      body: JSON.stringify(message()), headers: { 'content-type': 'text/plain' },
    }), 415, 'UNSUPPORTED_MEDIA_TYPE'],
    // Also an empty one: the route takes a body, and it must be JSON.
    [(c) => c.request('POST', '/v1/messages', { headers: { 'content-type': 'text/plain', 'content-length': '0' } }), 415, 'UNSUPPORTED_MEDIA_TYPE'],
  ]);
});

test('a form-encoded body (curl -d without a content type) is 415 UNSUPPORTED_MEDIA_TYPE naming what was sent and what to send', async (t) => {
  await rejects(t, (c) => c.request('POST', '/v1/messages', {
    body: 'to=alice&type=t&data=1', headers: { 'content-type': 'application/x-www-form-urlencoded' },
  }), 415, 'UNSUPPORTED_MEDIA_TYPE',
  /^the body must be application\/json, but its Content-Type is "application\/x-www-form-urlencoded": send Content-Type: application\/json$/);
});

test('a body with no Content-Type is 415 saying none was sent and what to send; a header echoed is escaped and cut', async (t) => {
  const server = await freshServer(t);
  const send = (headers: Record<string, string>): Promise<Response> => fetch(new URL('/v1/messages', server.client.url), {
    // A Uint8Array body: fetch adds no Content-Type of its own.
    method: 'POST', body: new TextEncoder().encode(JSON.stringify(message())), headers: { authorization: `Bearer ${server.client.token}`, ...headers },
  });
  const none = await send({});
  assert.equal(none.status, 415);
  assert.equal((await none.json() as { error: { message: string } }).error.message,
    'the body must be application/json, but the request has no Content-Type: send Content-Type: application/json');
  const long = await send({ 'content-type': `text/\u00e9${'x'.repeat(300)}` });
  assert.equal(long.status, 415);
  assert.match((await long.json() as { error: { message: string } }).error.message, /^the body must be application\/json, but its Content-Type is "text\/\\u00e9x{94}"…: send/);
  await assertNothingStored(t, server);
});

test('a gzip-encoded body is 415 UNSUPPORTED_MEDIA_TYPE naming the coding, not "not valid JSON"', async (t) => {
  const server = await freshServer(t);
  const res = await fetch(new URL('/v1/messages', server.client.url), {
    method: 'POST', body: gzipSync(JSON.stringify(message())),
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', authorization: `Bearer ${server.client.token}` },
  });
  assert.equal(res.status, 415);
  const body = await res.json() as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
  assert.match(body.error.message, /Content-Encoding "gzip" is not supported/);
  // A header echoed is cut and escaped (src/text-cut.ts quotedText): 100 characters, then "…".
  const long = await fetch(new URL('/v1/messages', server.client.url), {
    method: 'POST', body: JSON.stringify(message()),
    headers: { 'content-type': 'application/json', 'content-encoding': `br${'x'.repeat(300)}`, authorization: `Bearer ${server.client.token}` },
  });
  assert.equal(long.status, 415);
  assert.match((await long.json() as { error: { message: string } }).error.message, /^Content-Encoding "brx{98}"… is not supported/);
  await assertNothingStored(t, server);
});

test('a JSON body declared in a charset other than UTF-8 is 415 naming it; utf-8 in any spelling is accepted', async (t) => {
  const server = await freshServer(t);
  const send = (contentType: string): Promise<Response> => fetch(new URL('/v1/messages', server.client.url), {
    method: 'POST', body: JSON.stringify(message()),
    headers: { 'content-type': contentType, authorization: `Bearer ${server.client.token}` },
  });
  const refused: [string, string][] = [
    ['application/json; charset=latin1', 'latin1'], ['application/json;charset="ISO-8859-1"', 'iso-8859-1'], ['application/json; charset=utf-16', 'utf-16'],
    // Named as sent between its quotes; of two, the one that is not UTF-8, in either order.
    ['application/json; charset=" utf-8"', ' utf-8'],
    ['application/json; charset=utf-8; charset=latin1', 'latin1'], ['application/json; charset=latin1; charset=utf-8', 'latin1'],
  ];
  for (const [contentType, named] of refused) {
    const res = await send(contentType);
    assert.equal(res.status, 415, contentType);
    const body = await res.json() as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
    assert.equal(body.error.message, `charset ${JSON.stringify(named)} is not supported: JSON bodies are UTF-8`, contentType);
  }
  await assertNothingStored(t, server);
  for (const contentType of ['application/json; charset=utf-8', 'application/json; charset="UTF-8"', 'application/json;charset=utf8']) {
    assert.equal((await send(contentType)).status, 201, contentType);
  }
});

test('a body that is not valid UTF-8 is 400 naming it, not a user id with U+FFFD in it; valid multi-byte UTF-8 is accepted', async (t) => {
  const server = await freshServer(t);
  const send = (bytes: Buffer): Promise<Response> => fetch(new URL('/v1/messages', server.client.url), {
    method: 'POST', body: bytes, headers: { 'content-type': 'application/json', authorization: `Bearer ${server.client.token}` },
  });
  const json = (to: string): Buffer => Buffer.from(JSON.stringify({ to, type: 't', data: 1 }), 'utf8');
  const broken = [
    Buffer.concat([Buffer.from('{"to":"c'), Buffer.from([0xff]), Buffer.from('arol","type":"t","data":1}')]),
    Buffer.concat([Buffer.from('{"to":"carol","type":"t","data":"'), Buffer.from([0xe2, 0x82]), Buffer.from('"}')]),
  ];
  for (const bytes of broken) {
    const res = await send(bytes);
    assert.equal(res.status, 400);
    const body = await res.json() as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'INVALID_REQUEST');
    assert.match(body.error.message, /not valid UTF-8/);
  }
  await assertNothingStored(t, server);
  assert.equal((await send(json('zoë-€-😀'))).status, 201);
});

test('a message without type is 400 naming type', async (t) => {
  await rejects(t, post({ to: RECIPIENT, data: 1 }), 400, 'INVALID_REQUEST', /type/);
});

test('a type of 65 characters is 400, and one of 64 is accepted', async (t) => {
  await rejects(t, post(message({ type: 'a'.repeat(65) })), 400, 'INVALID_REQUEST', /body\/type/);
  const server = await sharedServer();
  const ok = await server.client.post('/v1/messages', message({ type: 'a'.repeat(64) }));
  assert.equal(ok.status, 201, ok.text);
});

test('a client_msg_id of 129 characters, or with a character outside printable ASCII, is 400; one of 128, space to ~, is accepted', async (t) => {
  await rejectsEach(t, [
    [post(message({ client_msg_id: 'k'.repeat(129) })), 400, 'INVALID_REQUEST', /body\/client_msg_id must be 1–128 printable ASCII characters/],
    [post(message({ client_msg_id: 'k\u00e9' })), 400, 'INVALID_REQUEST', /body\/client_msg_id/],
    [post(message({ client_msg_id: '' })), 400, 'INVALID_REQUEST', /body\/client_msg_id/],
  ]);
  const server = await sharedServer();
  const ok = await server.client.post('/v1/messages', message({ client_msg_id: `${'k'.repeat(126)} ~` }));
  assert.equal(ok.status, 201, ok.text);
});

test('1,001 recipients is 400, and 1,000 are accepted', async (t) => {
  const users = (n: number): string[] => [RECIPIENT, ...Array.from({ length: n - 1 }, (_, i) => `user-${i}`)];
  await rejects(t, post(message({ to: users(1001) })), 400, 'INVALID_REQUEST', /body\/to must have at most 1000 items/);
  const server = await sharedServer();
  const ok = await server.client.post('/v1/messages', message({ to: users(1000) }));
  assert.equal(ok.status, 201, ok.text);
  assert.equal((ok.body as { recipients: unknown[] }).recipients.length, 1000);
});

test('a user id with a space is 400', async (t) => {
  await rejectsEach(t, [
    [post(message({ to: [RECIPIENT, 'bo b'] })), 400, 'INVALID_REQUEST', /body\/to\/1/],
    [post(message({ to: 'al ice' })), 400, 'INVALID_REQUEST', /body\/to/],
  ]);
});

test('a user id with a control character is 400', async (t) => {
  await rejectsEach(t, [
    [post(message({ to: [RECIPIENT, 'bob\u0007'] })), 400, 'INVALID_REQUEST', /body\/to\/1/],
    [post(message({ to: [RECIPIENT], from: 'eve\u0000' })), 400, 'INVALID_REQUEST', /body\/from/],
  ]);
});

test('a user id that is not a string is 400', async (t) => {
  await rejectsEach(t, [
    [post(message({ to: [RECIPIENT, 42] })), 400, 'INVALID_REQUEST', /body\/to\/1 must be a string/],
    [post(message({ to: 42 })), 400, 'INVALID_REQUEST', /body\/to/],
  ]);
});

test('a negative ttl is 400, and so is one over 30 days', async (t) => {
  await rejectsEach(t, [
    [post(message({ ttl: -1 })), 400, 'INVALID_REQUEST', /body\/ttl/],
    [post(message({ ttl: 30 * 86_400 + 1 })), 400, 'INVALID_REQUEST', /body\/ttl/],
  ]);
});

test('an unknown field is 400 and the message names it', async (t) => {
  await rejects(t, post(message({ clientMsgId: 'typo' })), 400, 'INVALID_REQUEST', /unknown field "clientMsgId"$/);
});

test('a misspelt to is 400 naming the unknown field and saying the message has neither to nor room, alone and as a batch item (walkthrough F1)', async (t) => {
  const { to: _to, ...unaddressed } = message({ too: RECIPIENT });
  await rejects(t, post(unaddressed), 400, 'INVALID_REQUEST', /^body has an unknown field "too" \(and has neither "to" nor "room": give one\)$/);
  const server = await sharedServer();
  const batch = await server.client.post('/v1/messages/batch', { messages: [unaddressed, message({ tooo: 1 })] });
  assert.equal(batch.status, 200, batch.text);
  const [first, second] = (batch.body as { results: { status: number; error?: { message: string } }[] }).results;
  assert.equal(first?.error?.message, 'messages/0 has an unknown field "too" (and has neither "to" nor "room": give one)');
  assert.equal(second?.error?.message, 'messages/1 has an unknown field "tooo"', 'an addressed message is told of the field alone');
});

test('data of 65 KiB is 413 PAYLOAD_TOO_LARGE', async (t) => {
  await rejectsEach(t, [
    [post(message({ data: 'x'.repeat(65 * 1024) })), 413, 'PAYLOAD_TOO_LARGE',
      /^message is \d+ bytes \(the UTF-8 JSON of \{type, data\}; a from would count too\), over the limit of 65536 bytes \(PIXIU_MAX_MESSAGE_BYTES\)$/],
    [post(message({ data: 'x'.repeat(65 * 1024), from: 'svc' })), 413, 'PAYLOAD_TOO_LARGE', /\(the UTF-8 JSON of \{type, from, data\}\)/],
  ]);
});

test('a body over PIXIU_MAX_BODY_BYTES is 413 before it is parsed', async (t) => {
  // Not even JSON: a 413 (not a 400) shows the size was refused before parsing.
  const oversized = `{"to": "alice", "type": "t", "data": "${'x'.repeat(2000)}`;
  await rejects(t, post(oversized), 413, 'PAYLOAD_TOO_LARGE', /^the request body is over the limit of 1024 bytes \(1 KiB, PIXIU_MAX_BODY_BYTES\)$/, { maxBodyBytes: '1024' });
});

test('the default PIXIU_MAX_BODY_BYTES is 1 MiB: a body one byte over is 413 before it is parsed, one of exactly 1 MiB is read', async (t) => {
  const MiB = 1024 * 1024;
  // A valid message padded with spaces to the size wanted (whitespace is JSON's own).
  const sized = (bytes: number): string => {
    const json = JSON.stringify({ to: RECIPIENT, type: 't', data: 'sized' });
    return json + ' '.repeat(bytes - json.length);
  };
  await rejects(t, post(sized(MiB + 1)), 413, 'PAYLOAD_TOO_LARGE', /^the request body is over the limit of 1048576 bytes \(1 MiB, PIXIU_MAX_BODY_BYTES\)$/);
  const server = await sharedServer();
  const read = await server.client.post('/v1/messages', sized(MiB));
  assert.equal(read.status, 201, read.text);
});

test('an unknown room is 404; to and room together, or neither, are 400', async (t) => {
  await rejectsEach(t, [
    [post({ room: 'lobby', type: 't', data: 1 }), 404, 'NOT_FOUND', /no room lobby/],
    [post(message({ room: 'lobby' })), 400, 'INVALID_REQUEST', /both to and room/],
    [post({ type: 't', data: 1 }), 400, 'INVALID_REQUEST', /must have to .* or room/],
  ]);
});

test('a malformed MsgID in the path is 400', async (t) => {
  const server = await sharedServer();
  for (const id of ['xyz', '0001', '0001000000000001aa', '0001000000000000', 'ABCDEF0123456789', '0009000000000001']) {
    expectError(await server.client.get(`/v1/messages/${id}`), 400, 'INVALID_REQUEST', /not a message id/);
  }
});

test('no token is 401 UNAUTHORIZED, and nothing is stored', async (t) => {
  await rejects(t, (c) => c.post('/v1/messages', message(), { headers: { authorization: '' } }), 401, 'UNAUTHORIZED');
  const server = await sharedServer();
  expectError(await server.client.get('/v1/users/alice/messages', { headers: { authorization: '' } }), 401, 'UNAUTHORIZED');
  expectError(await server.client.get('/v1/messages/0001000000000001', { headers: { authorization: '' } }), 401, 'UNAUTHORIZED');
});

test('a wrong token is 401 and the answer holds no hint of the right one', async (t) => {
  let right = '';
  const answer = await rejects(t, (c) => {
    right = c.token;
    return c.post('/v1/messages', message(), { headers: { authorization: `Bearer ${c.token.slice(0, -1)}x` } });
  }, 401, 'UNAUTHORIZED');
  assert.ok(right.length >= 16);
  assert.ok(!answer.text.includes(right), 'the right token is not in the body');
  assert.ok(![...answer.headers.values()].some((v) => v.includes(right)), 'nor in a header');
  const server = await sharedServer();
  expectError(await server.client.post('/v1/messages', message(), { headers: { authorization: `Basic ${server.client.token}` } }), 401, 'UNAUTHORIZED');
});

test('a user\'s JWT (any token of a JWT\'s form) on a producer route is 401 saying which routes take a JWT; another wrong token is told no more', async (t) => {
  const server = await sharedServer();
  const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl';
  const refused = await server.client.post('/v1/messages', message(), { headers: { authorization: `Bearer ${jwt}` } });
  expectError(refused, 401, 'UNAUTHORIZED');
  assert.equal((refused.body as { error: { message: string } }).error.message,
    'missing or invalid API token (Authorization: Bearer <token>): this is a JWT; a user\'s JWT is for the client routes (/v1/me, /v1/connect), the producer and admin routes take the API token');
  const other = await server.client.get('/v1/users/alice/messages', { headers: { authorization: 'Bearer not-a-jwt-at-all' } });
  expectError(other, 401, 'UNAUTHORIZED');
  assert.equal((other.body as { error: { message: string } }).error.message, 'missing or invalid API token (Authorization: Bearer <token>)');
});

test('a 401 carries WWW-Authenticate: Bearer, with error="invalid_token" when a token was given and refused', async (t) => {
  const server = await sharedServer();
  const challenge = async (authorization: string): Promise<string | null> => {
    const answer = await server.client.get('/v1/users/alice/messages', { headers: { authorization } });
    assert.equal(answer.status, 401, authorization);
    return answer.headers.get('www-authenticate');
  };
  assert.equal(await challenge(''), 'Bearer');
  assert.equal(await challenge(`Basic ${server.client.token}`), 'Bearer');
  assert.equal(await challenge('Bearer wrong-token'), 'Bearer error="invalid_token"');
  const me = await server.client.get('/v1/me/messages', { headers: { authorization: 'Bearer not.a.jwt' } });
  assert.equal(me.status, 401);
  assert.equal(me.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
  const ok = await server.client.get('/v1/users/alice/messages');
  assert.equal(ok.headers.get('www-authenticate'), null, 'only on a 401');
  // `?token=` is read by /v1/connect alone: elsewhere the request carried no token.
  const queried = await server.client.get('/v1/me/messages?token=not.a.jwt', { headers: { authorization: '' } });
  assert.equal(queried.status, 401);
  assert.equal(queried.headers.get('www-authenticate'), 'Bearer');
});

test('an unknown route is 404 NOT_FOUND', async (t) => {
  const server = await sharedServer();
  expectError(await server.client.get('/v1/nothing-here'), 404, 'NOT_FOUND', /GET \/v1\/nothing-here/);
  expectError(await server.client.request('DELETE', '/v1/messages'), 404, 'NOT_FOUND');
  // With a JSON content type too, and a body that is empty or not JSON: still 404.
  const json = { 'content-type': 'application/json' };
  expectError(await server.client.request('DELETE', '/v1/messages', { headers: json }), 404, 'NOT_FOUND');
  expectError(await server.client.request('POST', '/v1/nope', { body: '{' }), 404, 'NOT_FOUND');
  expectError(await server.client.request('DELETE', '/healthz', { body: '{"a":1}' }), 404, 'NOT_FOUND');
  // And with a content type that is not JSON.
  expectError(await server.client.request('POST', '/v1/nope', { body: 'x', headers: { 'content-type': 'text/plain' } }), 404, 'NOT_FOUND');
});

test('a 128-character user id is readable in the history path, 4-byte characters too; 129 characters are 400; a bad encoding is a catalogue error', async (t) => {
  const server = await sharedServer();
  // 128 characters of 4 UTF-8 bytes each: the longest path parameter a user id makes, percent-encoded.
  for (const uid of ['u'.repeat(128), '\u{1F600}'.repeat(128)]) {
    const sent = await server.client.post('/v1/messages', { to: uid, type: 't', data: 1 });
    assert.equal(sent.status, 201, sent.text);
    const answer = await server.client.get(`/v1/users/${encodeURIComponent(uid)}/messages`);
    assert.equal(answer.status, 200, answer.text);
    assert.equal((answer.body as { messages: unknown[] }).messages.length, 1, uid);
  }
  const long = 'u'.repeat(129);
  for (const [field, body] of [['to', { to: long }], ['to/1', { to: ['ok', long] }], ['from', { to: 'ok', from: long }], ['room', { room: long }]] as const) {
    expectError(await server.client.post('/v1/messages', { type: 't', data: 1, ...body }), 400, 'INVALID_REQUEST', new RegExp(`^body/${field} must be 1–128 characters`));
  }
  expectError(await server.client.get(`/v1/users/${long}/messages`), 400, 'INVALID_REQUEST', /^params\/uid must be 1–128 characters/);
  expectError(await server.client.get(`/v1/users/${'u'.repeat(2000)}/messages`), 400, 'INVALID_REQUEST');
  expectError(await server.client.get('/v1/users/%zz/messages'), 400, 'INVALID_REQUEST');
});

test('integer query parameters take plain decimal digits only: 1e3, 0x10, " 1", 1.0, +1, 007 are 400 naming the parameter', async (t) => {
  const server = await sharedServer();
  // A user of its own on the shared service: her inbox holds the 3 messages sent here.
  const user = 'ivy';
  for (let i = 0; i < 3; i++) assert.equal((await server.client.post('/v1/messages', { to: user, type: 't', data: i })).status, 201);
  for (const bad of ['1e3', '0x10', '%20%201', '1%20', '1.0', '%2B1', '007', '', '-0']) {
    for (const param of ['after_seq', 'limit']) {
      const message = expectError(await server.client.get(`/v1/users/${user}/messages?${param}=${bad}`), 400, 'INVALID_REQUEST');
      // Its bounds said, never an example the parameter refuses (limit=0).
      assert.equal(message, `querystring/${param} must be an integer ${param === 'limit' ? 'from 1 to 1000' : 'from 0 to 9007199254740991'} written in decimal digits, without leading zeros`, `${param}=${bad}`);
    }
  }
  // Given twice: said as such, not as a type error about a value never written.
  for (const param of ['after_seq', 'limit']) {
    const message = expectError(await server.client.get(`/v1/users/${user}/messages?${param}=1&${param}=2`), 400, 'INVALID_REQUEST');
    assert.equal(message, `querystring/${param} is given 2 times; give it once`);
  }
  // Plain digits still work, 0 included.
  const page = await server.client.get(`/v1/users/${user}/messages?after_seq=1&limit=1`);
  assert.equal(page.status, 200, page.text);
  assert.deepEqual((page.body as { messages: Array<{ seq: number }> }).messages.map((m) => m.seq), [2]);
  assert.equal((await server.client.get(`/v1/users/${user}/messages?after_seq=0`)).status, 200);
});
