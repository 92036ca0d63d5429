/**
 * Errors a user reads say what is wrong in plain words, on the real service on a real
 * port: schema violations name the field and the rule (`body/to must not be empty`,
 * `must be a string or an array`), never Ajv's wording (`must NOT have fewer than 1
 * characters`, `must be string,array`); a missing body and an empty one say the same;
 * an unknown field is named before the required one it likely misspells (a batch posted
 * to POST /v1/messages is told where a batch goes; a ttl of the wrong type is told its
 * unit, whole seconds); a batch item
 * names itself in every error; and a route that takes no body refuses one instead of
 * ignoring it, while an empty one is still accepted.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { expectError } from '../harness/checks.js';
import { cleanupList, type HttpAnswer, type PixiuClient } from '../harness/pixiu-server.js';
import { startWithOwnRedis } from './api-fixture.js';

let client: PixiuClient;
const files = cleanupList();

before(async () => {
  ({ client } = await startWithOwnRedis(files));
});

after(() => files.run());

/** A valid message to alice with `change` applied. */
function message(change: Record<string, unknown> = {}): Record<string, unknown> {
  return { to: 'alice', type: 't', data: 1, ...change };
}

/** Asserts a 400 INVALID_REQUEST whose message is exactly `expected`. */
function expectInvalid(answer: HttpAnswer, expected: string, what: string): void {
  assert.equal(expectError(answer, 400, 'INVALID_REQUEST'), expected, what);
}

/** An answer of {@link send}: status and parsed JSON body. */
interface RawAnswer {
  status: number;
  body: { error?: { code: string; message: string } } & Record<string, unknown>;
}

/**
 * Sends one request with exactly these headers (plus Host and the token) and body:
 * `fetch` adds a Content-Type to a text body and a Content-Length to every body.
 * @param chunks when given, the body is sent chunked, one write per chunk
 */
function send(method: string, path: string, headers: Record<string, string>, body?: string, chunks?: string[]): Promise<RawAnswer> {
  const url = new URL(path, client.url);
  // Node's client sends a DELETE's body with no length of its own (then the server
  // would read it as the next request): give one.
  const framing = body !== undefined && headers['content-length'] === undefined && headers['transfer-encoding'] === undefined
    ? { 'content-length': String(Buffer.byteLength(body)) } : {};
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers: { authorization: `Bearer ${client.token}`, ...framing, ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as RawAnswer['body'] }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (chunks !== undefined) {
      for (const c of chunks) req.write(c);
      req.end();
    } else {
      req.end(body);
    }
  });
}

test('schema violations are worded plainly: empty, type, length and count, never Ajv\'s wording', async () => {
  const longChannel = 'c'.repeat(129);
  const cases: Array<[string, () => Promise<HttpAnswer>, string]> = [
    ['an empty to', () => client.post('/v1/messages', message({ to: '' })), 'body/to must not be empty'],
    ['an empty list of recipients', () => client.post('/v1/messages', message({ to: [] })), 'body/to must not be empty'],
    ['to as a number', () => client.post('/v1/messages', message({ to: 5 })), 'body/to must be a string or an array'],
    ['a recipient as a number', () => client.post('/v1/messages', message({ to: ['alice', 42] })), 'body/to/1 must be a string'],
    ['a ttl with a fraction', () => client.post('/v1/messages', message({ ttl: 1.5 })), 'body/ttl must be an integer (whole seconds)'],
    ['a ttl as "1d"', () => client.post('/v1/messages', message({ ttl: '1d' })), 'body/ttl must be an integer (whole seconds)'],
    ['a ttl of 0', () => client.post('/v1/messages', message({ ttl: 0 })), 'body/ttl must be at least 1 (whole seconds)'],
    ['a ttl over 30 days', () => client.post('/v1/messages', message({ ttl: 2_592_001 })), 'body/ttl must be at most 2592000 (whole seconds: 30 days)'],
    ['a broadcast\'s ttl over 30 days', () => client.post('/v1/broadcast', { type: 't', data: 1, ttl: 2_592_001 }), 'body/ttl must be at most 2592000 (whole seconds: 30 days)'],
    ['a body that is a list', () => client.post('/v1/messages', [1]), 'body must be an object'],
    ['a missing type', () => client.post('/v1/messages', { to: 'alice', data: 1 }), 'body is missing the required field "type"'],
    ['an empty batch', () => client.post('/v1/messages/batch', { messages: [] }), 'body/messages must not be empty'],
    ['tags as a list', () => client.post('/v1/broadcast', { type: 't', data: 1, tags: ['a'] }), 'body/tags must be an object'],
    ['1,001 users to query', () => client.post('/v1/presence/query', { users: Array.from({ length: 1001 }, (_, i) => `u${i}`) }), 'body/users must have at most 1000 items'],
    ['a batch of 1,001 messages', () => client.post('/v1/messages/batch', { messages: Array.from({ length: 1001 }, () => message()) }), 'body/messages must have at most 1000 items'],
    ['a channel name of 129 characters', () => client.post(`/v1/channels/${longChannel}/publish`, { type: 't', data: 1 }), 'params/channel must be at most 128 characters long'],
    ['a limit of 0', () => client.get('/v1/users/alice/messages?limit=0'), 'querystring/limit must be at least 1'],
    ['a client_msg_id of null (an unset optional field, as many serializers write it)', () => client.post('/v1/messages', message({ client_msg_id: null })),
      'body/client_msg_id must be a string, not null (an optional field with no value is left out)'],
    ['a ttl of null', () => client.post('/v1/messages', message({ ttl: null })), 'body/ttl must be an integer (whole seconds), not null (an optional field with no value is left out)'],
  ];
  for (const [what, sendIt, expected] of cases) {
    const answer = await sendIt();
    expectInvalid(answer, expected, what);
    assert.doesNotMatch(answer.text, /NOT|must be (string|integer|number|object|array)\b|required property/, what);
  }
});

test('a null is told to be left out only where it may be: an optional field, not an array item or a required field (walk8 F2)', async () => {
  const hint = ' (an optional field with no value is left out)';
  const cases: Array<[string, () => Promise<HttpAnswer>, string]> = [
    ['a null member', () => client.request('PUT', '/v1/rooms/lobby/members', { body: { users: [null] } }), 'body/users/0 must be a string, not null'],
    ['users of null (required)', () => client.request('PUT', '/v1/rooms/lobby/members', { body: { users: null } }), 'body/users must be an array, not null'],
    ['a null recipient', () => client.post('/v1/messages', message({ to: [null] })), 'body/to/0 must be a string, not null'],
    ['a type of null (required)', () => client.post('/v1/messages', message({ type: null })), 'body/type must be a string, not null'],
    ['a room of null and no to (one of them is needed)', () => client.post('/v1/messages', { room: null, type: 't', data: 1 }), 'body/room must be a string, not null'],
    ['a null tag', () => client.post('/v1/broadcast', { type: 't', data: 1, tags: { any: [null] } }), 'body/tags/any/0 must be a string, not null'],
    ['a null user to query', () => client.post('/v1/presence/query', { users: [null] }), 'body/users/0 must be a string, not null'],
    ['a batch item\'s null recipient', () => client.post('/v1/messages/batch', { messages: [message({ to: [null] })] }), 'messages/0/to/0 must be a string, not null'],
    // Optional: leaving them out is what is asked.
    ['a from of null', () => client.post('/v1/messages', message({ from: null })), `body/from must be a string, not null${hint}`],
    ['a room of null beside a to', () => client.post('/v1/messages', message({ room: null })), `body/room must be a string, not null${hint}`],
    ['a broadcast\'s tags of null', () => client.post('/v1/broadcast', { type: 't', data: 1, tags: null }), `body/tags must be an object, not null${hint}`],
    ['a broadcast\'s any of null', () => client.post('/v1/broadcast', { type: 't', data: 1, tags: { any: null } }), `body/tags/any must be an array, not null${hint}`],
    ['a batch item\'s ttl of null', () => client.post('/v1/messages/batch', { messages: [message({ ttl: null })] }), `messages/0/ttl must be an integer (whole seconds), not null${hint}`],
  ];
  for (const [what, sendIt, expected] of cases) {
    const answer = await sendIt();
    if (what.startsWith('a batch item')) {
      assert.equal(answer.status, 200, what);
      const item = (answer.body as { results: Array<{ error?: { code: string; message: string } }> }).results[0];
      assert.equal(item?.error?.message, expected, what);
    } else {
      expectInvalid(answer, expected, what);
    }
  }
});

test('an over-long message id gets the "not a message id" answer of every other malformed id', async () => {
  const expected = /^not a message id: "[^"]*" \(expected 16 lower-case hex digits\)$/;
  for (const id of ['a'.repeat(65), 'a'.repeat(300), 'xyz', 'a'.repeat(17)]) {
    expectError(await client.get(`/v1/messages/${id}`), 400, 'INVALID_REQUEST', expected);
  }
});

test('a route that takes a body says "a JSON body is required" for none and for an empty one alike', async () => {
  const routes: Array<[string, string]> = [
    ['POST', '/v1/messages'],
    ['POST', '/v1/messages/batch'],
    ['PUT', '/v1/rooms/r1/members'],
    ['DELETE', '/v1/rooms/r1/members'],
    ['POST', '/v1/presence/query'],
    ['POST', '/v1/broadcast'],
    ['POST', '/v1/channels/live.a/publish'],
  ];
  for (const [method, path] of routes) {
    for (const [what, headers] of [
      ['no body, no Content-Type', {}],
      ['no body, Content-Length: 0', { 'content-length': '0' }],
      ['an empty JSON body', { 'content-type': 'application/json', 'content-length': '0' }],
      ['an empty chunked JSON body', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }],
    ] as const) {
      const answer = await send(method, path, headers);
      assert.equal(answer.status, 400, `${method} ${path}, ${what}`);
      assert.deepEqual(answer.body, { error: { code: 'INVALID_REQUEST', message: 'a JSON body is required' } }, `${method} ${path}, ${what}`);
    }
  }
});

test('an unknown field is named before the required field it likely misspells', async () => {
  expectInvalid(await client.post('/v1/messages/batch', { msgs: [] }),
    'body has an unknown field "msgs" (and is missing the required field "messages")', 'the batch');
  expectInvalid(await client.post('/v1/presence/query', { user: ['a'] }),
    'body has an unknown field "user" (and is missing the required field "users")', 'a presence query');
  // In a batch item too.
  const answer = await client.post('/v1/messages/batch', { messages: [{ to: 'alice', kind: 't', data: 1 }] });
  assert.equal(answer.status, 200, answer.text);
  const [item] = (answer.body as { results: Array<{ error?: { message: string } }> }).results;
  assert.equal(item?.error?.message, 'messages/0 has an unknown field "kind" (and is missing the required field "type")');
});

test('a batch posted to POST /v1/messages is told where a batch goes; a batch item\'s ttl is told its unit too (walk2 L5)', async () => {
  expectInvalid(await client.post('/v1/messages', { messages: [message()] }),
    'body has an unknown field "messages" (and is missing the required field "type"); a batch goes to POST /v1/messages/batch', 'a batch body');
  // Only there: a batch item with a "messages" field is not sent to the batch route.
  const answer = await client.post('/v1/messages/batch', { messages: [{ to: 'alice', messages: [], data: 1 }, message({ ttl: '1d' })] });
  assert.equal(answer.status, 200, answer.text);
  const [first, second] = (answer.body as { results: Array<{ error?: { message: string } }> }).results;
  assert.equal(first?.error?.message, 'messages/0 has an unknown field "messages" (and is missing the required field "type")');
  assert.equal(second?.error?.message, 'messages/1/ttl must be an integer (whole seconds)');
});

test('a batch body holding a message\'s fields beside or instead of messages is told they go inside each item of messages (review4)', async () => {
  const inside = ' inside each item of messages: {"messages": [{"to": …, "type": …, "data": …}, …]}';
  expectInvalid(await client.post('/v1/messages/batch', { messages: [message()], type: 't', data: 1 }),
    `body has an unknown field "type"; type and data go${inside}`, 'type and data beside messages');
  expectInvalid(await client.post('/v1/messages/batch', { messages: [message()], ttl: 60 }),
    `body has an unknown field "ttl"; ttl goes${inside}`, 'a ttl for the whole batch');
  expectInvalid(await client.post('/v1/messages/batch', { to: 'alice', type: 't', data: 1 }),
    `body has an unknown field "to" (and is missing the required field "messages"); to, type and data go${inside}`, 'a single message');
  // Not a message's field: told as before.
  expectInvalid(await client.post('/v1/messages/batch', { messages: [message()], note: 1 }), 'body has an unknown field "note"', 'another field');
});

test('a batch item whose data nests too deep is named by its path, like the other item errors', async () => {
  let deep: unknown = 1;
  for (let i = 0; i < 65; i++) deep = [deep];
  const answer = await client.post('/v1/messages/batch', {
    messages: [message(), message({ data: deep }), message({ to: 'a b' }), message()],
  });
  assert.equal(answer.status, 200, answer.text);
  const results = (answer.body as { results: Array<{ status: number; error?: { code: string; message: string } }> }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 400, 400, 201]);
  assert.deepEqual(results[1]?.error, { code: 'INVALID_REQUEST', message: 'messages/1/data nests deeper than 64 levels' });
  assert.match(results[2]?.error?.message ?? '', /^messages\/2\/to /);
});

test('a route that takes no body refuses one (400) instead of ignoring it; an empty one is accepted', async () => {
  const path = '/v1/users/nobody/connections';
  const refused: Array<[string, Record<string, string>, string | undefined, string[]?]> = [
    ['a JSON object', { 'content-type': 'application/json' }, '{"a":1}'],
    ['JSON null', { 'content-type': 'application/json' }, 'null'],
    ['a text body', { 'content-type': 'text/plain' }, 'device=phone'],
    ['a body without a Content-Type', {}, 'device='],
    ['a chunked body without a Content-Type', { 'transfer-encoding': 'chunked' }, undefined, ['', '{"a":1}']],
  ];
  for (const [what, headers, body, chunks] of refused) {
    const answer = await send('DELETE', path, headers, body, chunks);
    assert.equal(answer.status, 400, what);
    assert.deepEqual(answer.body, { error: { code: 'INVALID_REQUEST', message: 'this route takes no body' } }, what);
  }
  const accepted: Array<[string, Record<string, string>, string[]?]> = [
    ['no body, no headers', {}],
    ['Content-Length: 0', { 'content-length': '0' }],
    ['Content-Length: 0 with a JSON Content-Type', { 'content-type': 'application/json', 'content-length': '0' }],
    ['Content-Length: 0 with another Content-Type', { 'content-type': 'text/plain', 'content-length': '0' }],
    ['an empty chunked body without a Content-Type', { 'transfer-encoding': 'chunked' }, []],
    ['an empty chunked JSON body', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, []],
  ];
  for (const [what, headers, chunks] of accepted) {
    const answer = await send('DELETE', path, headers, undefined, chunks);
    assert.equal(answer.status, 200, `${what}: ${JSON.stringify(answer.body)}`);
    assert.deepEqual(answer.body, { user: 'nobody', closed: 0 }, what);
  }
});

test('a route that takes no body refuses a sized one from its headers, before any of it arrives', async () => {
  // Content-Length 1000 and not a byte sent: the refusal is decided from the headers
  // (src/api/validation.ts), not after waiting for a body the client may never send.
  const url = new URL('/v1/users/nobody/connections', client.url);
  const req = httpRequest(url, { method: 'DELETE', headers: { authorization: `Bearer ${client.token}`, 'content-type': 'text/plain', 'content-length': '1000' } });
  req.on('error', () => undefined);
  req.flushHeaders();
  let deadline: NodeJS.Timeout | undefined;
  try {
    const answer = await Promise.race([
      new Promise<RawAnswer>((resolve, reject) => {
        req.once('response', (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => { text += c; });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as RawAnswer['body'] }));
          res.on('error', reject);
        });
      }),
      // A bound on the wait, not a wait: the answer comes at once or the test fails.
      new Promise<never>((_resolve, reject) => { deadline = setTimeout(() => reject(new Error('no answer while the body was still to come')), 5000); }),
    ]);
    assert.equal(answer.status, 400);
    assert.deepEqual(answer.body, { error: { code: 'INVALID_REQUEST', message: 'this route takes no body' } });
  } finally {
    clearTimeout(deadline);
    req.destroy();
  }
});

test('a GET with a body is refused (400) like any route that takes none; an empty one is accepted; on no route it is 404', async () => {
  for (const path of ['/v1/users/u1/presence', '/v1/users/u1/messages', '/healthz']) {
    const refused: Array<[string, Record<string, string>, string | undefined, string[]?]> = [
      ['a text body', { 'content-type': 'text/plain' }, 'garbage'],
      ['a JSON body', { 'content-type': 'application/json' }, '{"limit":5}'],
      ['a chunked body', { 'transfer-encoding': 'chunked' }, undefined, ['', 'x']],
    ];
    for (const [what, headers, body, chunks] of refused) {
      const answer = await send('GET', path, headers, body, chunks);
      assert.equal(answer.status, 400, `${path}, ${what}`);
      assert.deepEqual(answer.body, { error: { code: 'INVALID_REQUEST', message: 'this route takes no body' } }, `${path}, ${what}`);
    }
    const accepted: Array<[string, Record<string, string>, string[]?]> = [
      ['no body', {}],
      ['Content-Length: 0', { 'content-length': '0' }],
      ['an empty chunked body', { 'transfer-encoding': 'chunked' }, []],
    ];
    for (const [what, headers, chunks] of accepted) {
      const answer = await send('GET', path, headers, undefined, chunks);
      assert.equal(answer.status, 200, `${path}, ${what}: ${JSON.stringify(answer.body)}`);
    }
  }
  // No route: 404 whatever the body, as for any method (docs/api.md).
  const unrouted: Array<[string, Record<string, string>, string | undefined, string[]?]> = [
    ['a text body', { 'content-type': 'text/plain' }, 'garbage'],
    ['a chunked body', { 'transfer-encoding': 'chunked' }, undefined, ['x']],
  ];
  for (const [what, headers, body, chunks] of unrouted) {
    const answer = await send('GET', '/v1/nothing-here', headers, body, chunks);
    assert.equal(answer.status, 404, `an unknown route, ${what}: ${JSON.stringify(answer.body)}`);
    assert.equal(answer.body.error?.code, 'NOT_FOUND', what);
  }
});

test('on a route that takes no body, a charset, a Content-Encoding or an unparseable Content-Type changes nothing: empty is accepted, a body is 400', async () => {
  const routes: Array<[string, string, unknown]> = [
    ['GET', '/v1/users/u1/presence', undefined],
    ['DELETE', '/v1/users/nobody/connections', { user: 'nobody', closed: 0 }],
  ];
  const headerSets: Record<string, string>[] = [
    { 'content-type': 'application/json; charset=latin1' },
    { 'content-encoding': 'gzip' },
    { 'content-type': 'text/plain; charset=utf-16', 'content-encoding': 'br' },
    // A Content-Type fastify cannot parse (it answered 415 before any parser ran: walk35 F1).
    { 'content-type': '' },
    { 'content-type': ';' },
    { 'content-type': 'not a media type' },
  ];
  for (const [method, path, emptyAnswer] of routes) {
    for (const headers of headerSets) {
      const what = `${method} ${path} ${JSON.stringify(headers)}`;
      const empty = await send(method, path, { ...headers, 'content-length': '0' });
      assert.equal(empty.status, 200, `${what}, empty: ${JSON.stringify(empty.body)}`);
      if (emptyAnswer !== undefined) assert.deepEqual(empty.body, emptyAnswer, what);
      const full = await send(method, path, headers, '{}');
      assert.equal(full.status, 400, `${what}, with a body`);
      assert.deepEqual(full.body, { error: { code: 'INVALID_REQUEST', message: 'this route takes no body' } }, what);
    }
  }
  // A route that takes a body still refuses them (415), before reading it.
  const latin1 = await send('POST', '/v1/messages', { 'content-type': 'application/json; charset=latin1' }, '{"to":"a","type":"t","data":1}');
  assert.equal(latin1.status, 415);
});
