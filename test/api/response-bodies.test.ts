/**
 * Success bodies are whole (docs/api.md): fastify serializes an answer that has a
 * response schema with fast-json-stringify, which drops the fields a schema does not
 * declare and coerces values to its types (null to 0, any value to a string). Each
 * route's answer is compared here with what the route builds — a message's `data`
 * exactly as posted, every documented field, nulls kept — against the real service on
 * a real port and a private redis-server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { PixiuClient, cleanupList, type HttpAnswer } from '../harness/pixiu-server.js';
import { TestClient, testToken, type Frame } from '../harness/ws-client.js';
import { startWithOwnRedis } from './api-fixture.js';

const JWT_SECRET = 'response-bodies-hs256-secret-of-32-chars-or-more';
const JWT_KEY = { kind: 'secret', secret: JWT_SECRET } as const;
/** Entries an inbox keeps: small, so that a test can push a message out of one. */
const INBOX_CAP = 3;

/** Content of every JSON kind, nested, with what a serializer could change: unicode, escapes, nulls, numbers. */
const RICH_DATA = {
  text: 'héllo 世界 😀 \u2028 "quoted" \\ \t\n',
  nested: { list: [1, -2.5, 1e-7, 1e21, 2 ** 53 - 1, null, true, false, '', [], {}], deeper: [[[{ k: null, v: [0] }]]] },
  'key with spaces': 'ok',
  '': 'empty key',
  constructor: 'a plain string',
  nul: null,
  zero: 0,
};
/** Values of `data` that are not objects. */
const SCALAR_DATA: unknown[] = [null, 'just a string', 42, -0.5, true, false, [1, 'two', [null]], []];

let api: PixiuClient;
let url: string;
const files = cleanupList();

before(async () => {
  const server = await startWithOwnRedis(files, { jwtSecret: JWT_SECRET, inboxCap: String(INBOX_CAP) });
  api = server.client;
  url = server.service.url;
});

after(() => files.run());

/** The answer's JSON body, after checking its status. */
function bodyOf<T = Record<string, unknown>>(answer: HttpAnswer, status = 200): T {
  assert.equal(answer.status, status, answer.text.slice(0, 500));
  return answer.body as T;
}

/** Posts one message; resolves with its id. */
async function post(message: object): Promise<string> {
  return bodyOf<{ id: string }>(await api.post('/v1/messages', message), 201).id;
}

/** A client of `user`'s JWT. */
async function asUser(user: string): Promise<PixiuClient> {
  return new PixiuClient(url, await testToken(JWT_KEY, user));
}

/** Asserts a ms timestamp of about now. */
function assertRecentMs(ms: unknown, what: string): asserts ms is number {
  assert.ok(Number.isInteger(ms) && Math.abs((ms as number) - Date.now()) < 60_000, `${what}: ${String(ms)}`);
}

test('GET /v1/messages/{id} returns the stored data exactly as posted, with every field of the record', async () => {
  const message = { to: ['ada', 'bob'], from: 'svc', type: 'chat.text', data: RICH_DATA, client_msg_id: 'rich-1', ttl: 3600 };
  const id = await post(message);
  const answer = await api.get(`/v1/messages/${id}`);
  const record = bodyOf(answer);
  assertRecentMs(record.ts, 'ts');
  assert.deepEqual(record, {
    id, kind: 'user', type: 'chat.text', from: 'svc', ts: record.ts, expires_at: record.ts + 3600 * 1000,
    client_msg_id: 'rich-1', data: RICH_DATA,
    recipients: [{ user: 'ada', seq: 1, acked_by: [] }, { user: 'bob', seq: 1, acked_by: [] }],
  });
  // The fields docs/api.md lists, no more (the serializer writes the required ones first:
  // member order carries no meaning, RFC 8259 §4), and the data's bytes as JSON writes them.
  assert.deepEqual(Object.keys(record).sort(), ['client_msg_id', 'data', 'expires_at', 'from', 'id', 'kind', 'recipients', 'ts', 'type']);
  assert.ok(answer.text.includes(`"data":${JSON.stringify(RICH_DATA)}`), answer.text);

  // Without from and client_msg_id: neither field, rather than an empty one.
  for (const data of SCALAR_DATA) {
    const plain = bodyOf(await api.get(`/v1/messages/${await post({ to: 'cat', type: 't', data })}`));
    assert.deepEqual(Object.keys(plain).sort(), ['data', 'expires_at', 'id', 'kind', 'recipients', 'ts', 'type']);
    assert.deepEqual(plain.data, data, JSON.stringify(data));
  }
});

test('acked_by names the devices that acked (POST /v1/me/ack answers the cursor), and seq is null once the inbox trimmed the message', async () => {
  const ids: string[] = [];
  for (let i = 0; i < INBOX_CAP + 1; i++) ids.push(await post({ to: 'dot', type: 't', data: { i } }));
  const dot = await asUser('dot');
  assert.deepEqual(bodyOf(await dot.post('/v1/me/ack', { device: 'phone', seq: INBOX_CAP })), { device: 'phone', cursor: INBOX_CAP });
  assert.deepEqual(bodyOf(await dot.post('/v1/me/ack', { device: 'web', seq: INBOX_CAP + 1 })), { device: 'web', cursor: INBOX_CAP + 1 });
  // The cursor never moves back: the answer says where it is, not what was asked.
  assert.deepEqual(bodyOf(await dot.post('/v1/me/ack', { device: 'web', seq: 2 })), { device: 'web', cursor: INBOX_CAP + 1 });

  const recipientsOf = async (id: string | undefined): Promise<unknown> => bodyOf(await api.get(`/v1/messages/${id}`)).recipients;
  assert.deepEqual(await recipientsOf(ids[0]), [{ user: 'dot', seq: null, acked_by: [] }], 'trimmed: seq null, not 0');
  assert.deepEqual(await recipientsOf(ids[INBOX_CAP - 1]), [{ user: 'dot', seq: INBOX_CAP, acked_by: ['phone', 'web'] }]);
  assert.deepEqual(await recipientsOf(ids[INBOX_CAP]), [{ user: 'dot', seq: INBOX_CAP + 1, acked_by: ['web'] }]);
});

test('the history routes return every documented field, as the WebSocket msg frames carry them, and the gaps', async () => {
  const user = 'eve';
  assert.equal((await api.request('PUT', '/v1/rooms/eroom/members', { body: { users: [user] } })).status, 200);
  await post({ to: user, from: 'svc', type: 'a', data: RICH_DATA });
  assert.equal((await api.post('/v1/messages', { room: 'eroom', from: 'fay', type: 'b', data: [1, null] })).status, 201);
  await post({ to: user, type: 'c', data: null });
  const client = await TestClient.connect(url, { token: await testToken(JWT_KEY, user), params: { device: 'phone' } });
  files.after(() => client.close());
  const welcome = await client.next();
  assert.equal(welcome.t, 'welcome');
  const frames = await client.msgs(3);
  const views = frames.map(({ t: _t, ...view }: Frame) => view);
  const expected = { user, epoch: welcome.epoch, first_seq: 1, latest_seq: 3, messages: views, gaps: [], next_after_seq: 3 };

  const page = bodyOf(await api.get(`/v1/users/${user}/messages`));
  assert.deepEqual(page, expected);
  assert.equal(typeof page.epoch, 'string');
  const [first, fromRoom, last] = page.messages as Array<Record<string, unknown>>;
  assert.deepEqual(Object.keys(first ?? {}).sort(), ['data', 'from', 'id', 'seq', 'ts', 'type']);
  assert.deepEqual(first?.data, RICH_DATA);
  assert.deepEqual(Object.keys(fromRoom ?? {}).sort(), ['data', 'from', 'id', 'room', 'seq', 'ts', 'type']);
  assert.equal(fromRoom?.room, 'eroom');
  assert.deepEqual(Object.keys(last ?? {}).sort(), ['data', 'id', 'seq', 'ts', 'type']);
  assert.equal(last?.data, null);
  assert.deepEqual(bodyOf(await (await asUser(user)).get('/v1/me/messages')), expected);

  // A trimmed inbox: its gap and first_seq; a user with no inbox: epoch null, not "".
  for (let i = 0; i < INBOX_CAP; i++) await post({ to: 'gil', type: 't', data: i });
  await post({ to: 'gil', type: 't', data: 'kept' });
  const trimmed = bodyOf(await api.get('/v1/users/gil/messages?after_seq=0&limit=1'));
  assert.deepEqual({ ...trimmed, epoch: null, messages: (trimmed.messages as Array<{ data: unknown }>).map((m) => m.data) },
    { user: 'gil', epoch: null, first_seq: 2, latest_seq: 4, messages: [1], gaps: [{ from: 1, to: 1, reason: 'trimmed' }], next_after_seq: 2 });
  const none = bodyOf(await api.get('/v1/users/nobody/messages'));
  assert.equal(none.epoch, null);
  assert.deepEqual(Object.keys(none).sort(), ['epoch', 'first_seq', 'gaps', 'latest_seq', 'messages', 'next_after_seq', 'user']);
});

test('the presence routes return every connection field, user ids like __proto__ included, and DELETE counts what it closed', async () => {
  const opened = Date.now();
  const client = await TestClient.connect(url, { token: await testToken(JWT_KEY, 'hal'), params: { device: 'phone' } });
  files.after(() => client.close());
  const welcome = await client.next();
  assert.equal(welcome.t, 'welcome');

  const presence = bodyOf<{ user: string; online: boolean; connections: Array<Record<string, unknown>> }>(await api.get('/v1/users/hal/presence'));
  const conn = presence.connections[0] ?? {};
  assert.equal(typeof conn.node, 'string');
  assert.ok(Number.isInteger(conn.since) && (conn.since as number) >= opened - 1000 && (conn.since as number) <= Date.now(), String(conn.since));
  const connection = { conn: welcome.conn, device: 'phone', node: conn.node, since: conn.since };
  assert.deepEqual(presence, { user: 'hal', online: true, connections: [connection] });

  const query = bodyOf(await api.post('/v1/presence/query', { users: ['hal', '__proto__', 'hal', 'ivy'] }));
  const offline = { online: false, devices: [], connections: [] };
  // Built with fromEntries: a `__proto__` key in an object literal would set the prototype.
  assert.deepEqual(query, { users: Object.fromEntries([['hal', { online: true, devices: ['phone'], connections: [connection] }], ['__proto__', offline], ['ivy', offline]]) });

  assert.deepEqual(bodyOf(await api.request('DELETE', '/v1/users/hal/connections?device=phone')), { user: 'hal', closed: 1 });
  assert.equal((await client.waitClose()).code, 1008);
});

test('the rooms routes return every field: counts, the page and its cursor, null on the last page; a room message\'s record', async () => {
  const put = async (users: string[]): Promise<unknown> => bodyOf(await api.request('PUT', '/v1/rooms/jam/members', { body: { users } }));
  assert.deepEqual(await put(['kim', 'lou']), { room: 'jam', added: 2, size: 2 });
  assert.deepEqual(await put(['lou', 'max']), { room: 'jam', added: 1, size: 3 });

  const first = bodyOf(await api.get('/v1/rooms/jam/members?limit=2'));
  assert.equal(typeof first.next_cursor, 'string');
  assert.deepEqual(first, { room: 'jam', size: 3, members: ['kim', 'lou'], next_cursor: first.next_cursor });
  const last = bodyOf(await api.get(`/v1/rooms/jam/members?limit=2&cursor=${String(first.next_cursor)}`));
  assert.deepEqual(last, { room: 'jam', size: 3, members: ['max'], next_cursor: null });

  const sent = bodyOf<{ id: string }>(await api.post('/v1/messages', { room: 'jam', type: 'r', data: RICH_DATA }), 201);
  assert.deepEqual(sent, { id: sent.id, room: 'jam', recipients: 3, duplicate: false });
  const record = bodyOf(await api.get(`/v1/messages/${sent.id}`));
  assertRecentMs(record.ts, 'ts');
  assert.deepEqual(record, { id: sent.id, kind: 'room', type: 'r', room: 'jam', ts: record.ts, expires_at: record.expires_at, data: RICH_DATA, recipients: [] });

  const removed = bodyOf(await api.request('DELETE', '/v1/rooms/jam/members', { body: { users: ['kim', 'zed'] } }));
  assert.deepEqual(removed, { room: 'jam', removed: 1, size: 2 });
});

test('POST /v1/messages/batch returns every result whole: user, room, failed and duplicate items', async () => {
  assert.equal((await api.request('PUT', '/v1/rooms/band/members', { body: { users: ['ned', 'oli'] } })).status, 200);
  const user = { to: ['ned', 'pia'], type: 't', data: RICH_DATA, client_msg_id: 'batch-1' };
  const answer = await api.post('/v1/messages/batch', { messages: [user, { room: 'band', type: 't', data: 1 }, { to: 'ned', type: 'bad type', data: 1 }, user] });
  const results = bodyOf<{ results: Array<Record<string, unknown>> }>(answer).results;
  const [sent, room, failed] = results;
  assert.deepEqual(results, [
    { status: 201, id: sent?.id, recipients: [{ user: 'ned', seq: 1 }, { user: 'pia', seq: 1 }], duplicate: false },
    { status: 201, id: room?.id, room: 'band', recipients: 2, duplicate: false },
    { status: 400, error: { code: 'INVALID_REQUEST', message: (failed?.error as { message?: unknown } | undefined)?.message } },
    { status: 200, id: sent?.id, recipients: [{ user: 'ned', seq: 1 }, { user: 'pia', seq: 1 }], duplicate: true },
  ]);
  assert.match(String((failed?.error as { message?: unknown }).message), /messages\/2\/type/);
  assert.deepEqual(bodyOf(await api.get(`/v1/messages/${String(sent?.id)}`)).data, RICH_DATA);
});
