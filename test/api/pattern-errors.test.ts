/**
 * A value that breaks a field's pattern (a user id with a control character, a device
 * name with a space, a bad channel name or `last_bseq` …) is 400 INVALID_REQUEST with a
 * message naming the field and its rule in words, never the regular expression, on
 * every route and on `GET /v1/connect` before the upgrade. Every pattern the API
 * validates with has its words (src/api/pattern-rules.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasWords } from '../../src/api/pattern-rules.js';
import { expectError } from '../harness/checks.js';
import { PixiuClient, type HttpAnswer } from '../harness/pixiu-server.js';
import { fileRedis } from '../harness/file-redis.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, expectRefused, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';

const USER_ID_WORDS = 'must be 1–128 characters, no whitespace, control characters or lone surrogates';
const NAME_WORDS = 'must be 1–64 characters, each one of A-Z a-z 0-9 . _ : -';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url });
});

/** Checks a refusal's message: it starts with the field and its rule in words, and holds no regular expression. */
function expectWords(message: string, expected: string, what: string): void {
  assert.ok(message.startsWith(expected), `${what}: ${JSON.stringify(message)} should start with ${JSON.stringify(expected)}`);
  assert.doesNotMatch(message, /pattern|\\/, `${what}: no regular expression in ${JSON.stringify(message)}`);
}

test('a value that breaks a pattern is 400 INVALID_REQUEST naming the field and its rule in words, never the regular expression', async () => {
  const c = gw.client;
  const msg = (change: Record<string, unknown>): Record<string, unknown> => ({ to: 'alice', type: 't', data: 1, ...change });
  const cases: Array<[string, () => Promise<HttpAnswer>, string]> = [
    ['to, a control character', () => c.post('/v1/messages', msg({ to: 'a\u0001b' })), `body/to ${USER_ID_WORDS}`],
    ['to, a list with a space', () => c.post('/v1/messages', msg({ to: ['alice', 'b ob'] })), `body/to/1 ${USER_ID_WORDS}`],
    ['from', () => c.post('/v1/messages', msg({ from: 'svc\u0000' })), `body/from ${USER_ID_WORDS}`],
    ['room', () => c.post('/v1/messages', { room: 'r\n1', type: 't', data: 1 }), `body/room ${USER_ID_WORDS}`],
    ['type', () => c.post('/v1/messages', msg({ type: 'chat text' })), `body/type ${NAME_WORDS}`],
    ['client_msg_id', () => c.post('/v1/messages', msg({ client_msg_id: 'clé' })), 'body/client_msg_id must be 1–128 printable ASCII characters (space to ~)'],
    ['users/0 of a room', () => c.request('PUT', '/v1/rooms/r1/members', { body: { users: ['a\tb'] } }), `body/users/0 ${USER_ID_WORDS}`],
    ['users/1 of a presence query', () => c.post('/v1/presence/query', { users: ['ann', 'b\u007f'] }), `body/users/1 ${USER_ID_WORDS}`],
    ['a room id in the path', () => c.get('/v1/rooms/a%20b/members'), `params/room ${USER_ID_WORDS}`],
    ['a member cursor', () => c.get('/v1/rooms/r1/members?cursor=abc'), 'querystring/cursor must be the next_cursor of an earlier page (1–17 decimal digits)'],
    ['a user id in the path', () => c.get('/v1/users/a%01b/messages'), `params/uid ${USER_ID_WORDS}`],
    ['a device to disconnect', () => c.request('DELETE', '/v1/users/ann/connections?device=my%20phone'), `querystring/device ${NAME_WORDS}`],
    ['a channel name', () => c.post('/v1/channels/live..chat/publish', { type: 't', data: 1 }), 'params/channel must be a channel name: segments of A-Z a-z 0-9 _ : - separated by single dots (like live.stream42.chat)'],
    ['a broadcast tag', () => c.post('/v1/broadcast', { type: 't', data: 1, tags: { all: ['vip user'] } }), 'body/tags/all/0 must be 1–64 characters, no whitespace or control characters'],
  ];
  for (const [what, send, expected] of cases) {
    expectWords(expectError(await send(), 400, 'INVALID_REQUEST'), expected, what);
  }
  // A client route, with a user token.
  const asUser = new PixiuClient(gw.url, await testToken(JWT_KEY, 'ann'));
  const ack = expectError(await asUser.post('/v1/me/ack', { device: 'my phone', seq: 1 }), 400, 'INVALID_REQUEST');
  expectWords(ack, `body/device ${NAME_WORDS}`, 'the device of an ack');
});

test('a batch item that breaks a pattern fails alone, with its rule in words', async () => {
  const answer = await gw.client.post('/v1/messages/batch', { messages: [{ to: 'a b', type: 't', data: 1 }, { to: 'alice', type: 't', data: 1 }] });
  assert.equal(answer.status, 200, answer.text);
  const [bad, good] = (answer.body as { results: Array<{ status: number; error?: { code: string; message: string } }> }).results;
  assert.equal(bad?.status, 400);
  assert.equal(bad?.error?.code, 'INVALID_REQUEST');
  expectWords(bad?.error?.message ?? '', `messages/0/to ${USER_ID_WORDS}`, 'a batch item');
  assert.equal(good?.status, 201);
});

test('GET /v1/connect with a bad device or last_bseq is refused 400 before the upgrade, with the rule in words', async () => {
  const device = await expectRefused(gw.connect('ann', { device: 'my phone' }), 400, 'INVALID_REQUEST');
  expectWords(device, `querystring/device ${NAME_WORDS}`, 'device');
  const bseq = await expectRefused(gw.connect('ann', { params: { last_bseq: 'yesterday' } }), 400, 'INVALID_REQUEST');
  expectWords(bseq, 'querystring/last_bseq must be a bseq as a bcast frame gives it: two whole numbers joined by - (like 1718000000000-0)', 'last_bseq');
});

test('every pattern of the OpenAPI document has its rule in words', async () => {
  const doc = (await gw.client.get('/v1/openapi.json')).body;
  const patterns = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(walk);
    } else if (typeof node === 'object' && node !== null) {
      for (const [key, value] of Object.entries(node)) {
        if (key === 'pattern' && typeof value === 'string') patterns.add(value);
        else walk(value);
      }
    }
  };
  walk(doc);
  assert.ok(patterns.size >= 5, `the document's patterns: ${[...patterns].join(' ')}`);
  for (const p of patterns) assert.ok(hasWords(p), `no words for the pattern ${p} (declare it with wordedPattern)`);
});
