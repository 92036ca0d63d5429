/**
 * Unknown fields in a JSON body (docs/api.md, "Input rules"; src/api/validation.ts:
 * bodies are validated strictly, a typo in a field name is an error, not silently
 * dropped): refused with 400 INVALID_REQUEST naming the field on every route that
 * takes a body — producer, admin and client (`POST /v1/me/ack`) alike — before
 * anything is done. Against the real service on a real port and a private
 * redis-server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { expectError } from '../harness/checks.js';
import { PixiuClient, cleanupList } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import { startWithOwnRedis } from './api-fixture.js';

const JWT_SECRET = 'unknown-body-field-tests-hs256-secret-32ch';
const UNKNOWN = /body has an unknown field "extra"/;

let api: PixiuClient;
/** As user `ursa`, with a client JWT. */
let me: PixiuClient;
/** A stored message's id, to `ursa`. */
let storedId: string;
const files = cleanupList();

before(async () => {
  const server = await startWithOwnRedis(files, { jwtSecret: JWT_SECRET });
  api = server.client;
  me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, 'ursa'));
  const posted = await api.post('/v1/messages', { to: 'ursa', type: 't', data: 1 });
  assert.equal(posted.status, 201, posted.text);
  storedId = (posted.body as { id: string }).id;
  assert.equal((await api.request('PUT', '/v1/rooms/uroom/members', { body: { users: ['ursa'] } })).status, 200);
});

after(() => files.run());

test('every route that takes a JSON body refuses an unknown field in it, naming it, and does nothing', async () => {
  const refused: Array<[string, string, Record<string, unknown>, PixiuClient?]> = [
    ['POST', '/v1/messages', { to: 'nobody-yet', type: 't', data: 1 }],
    ['POST', '/v1/messages/batch', { messages: [{ to: 'nobody-yet', type: 't', data: 1 }] }],
    ['POST', '/v1/presence/query', { users: ['ursa'] }],
    ['PUT', '/v1/rooms/uroom/members', { users: ['nobody-yet'] }],
    ['DELETE', '/v1/rooms/uroom/members', { users: ['ursa'] }],
    ['POST', '/v1/broadcast', { type: 't', data: 1 }],
    ['POST', '/v1/channels/news/publish', { type: 't', data: 1 }],
    ['POST', '/v1/me/ack', { device: 'phone', seq: 1 }, me],
  ];
  for (const [method, route, body, client = api] of refused) {
    const answer = await client.request(method, route, { body: { ...body, extra: true } });
    expectError(answer, 400, 'INVALID_REQUEST', UNKNOWN);
  }
  // Nothing was stored, added, removed or acked.
  const history = await api.get('/v1/users/nobody-yet/messages');
  assert.equal((history.body as { epoch: unknown }).epoch, null, history.text);
  const members = await api.get('/v1/rooms/uroom/members');
  assert.deepEqual((members.body as { members: string[] }).members, ['ursa'], members.text);
  const record = await api.get(`/v1/messages/${storedId}`);
  assert.deepEqual((record.body as { recipients: unknown }).recipients, [{ user: 'ursa', seq: 1, acked_by: [] }]);
  // The same bodies without the field are taken (the refusal was the field's).
  const ack = await me.post('/v1/me/ack', { device: 'phone', seq: 1 });
  assert.equal(ack.status, 200, ack.text);
});
