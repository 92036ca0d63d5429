/**
 * The internal read route, `POST /internal/v1/records` (DESIGN.md §9;
 * src/cluster/records-route.ts), on an in-process service: the cluster secret from
 * Redis, not the API token, opens it; bodies are validated; only this store's
 * partitions are answered; a secret recreated in Redis is picked up.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Keys } from '../../src/redis/keys.js';
import { RECORDS_PATH } from '../../src/cluster/records-route.js';
import { SECRET_REFRESH_MIN_MS } from '../../src/cluster/cluster-secret.js';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, PixiuClient, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const PREFIX = 'rr:';
const cleanup = cleanupList();
let redis: RedisServer;
let server: InProcessServer;
let direct: Redis;
/** Requests with the cluster secret as their bearer token. */
let node: PixiuClient;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  server = await startInProcess(cleanup, { redisUrl: redis.url, redisPrefix: PREFIX, storeDurability: 'relaxed' });
  direct = (await openInbox(cleanup, redis.url, PREFIX)).redis;
  node = new PixiuClient(server.service.url, await direct.get(new Keys(PREFIX).clusterSecret()) ?? '');
});

after(() => cleanup.run());

test('without the cluster secret the route is 401 with the JSON error body (the API token does not open it), before the body is read', async () => {
  const body = { ids: [encodeMsgId({ partition: 0, kind: MsgKind.user, counter: 1 })] };
  expectError(await node.post(RECORDS_PATH, body, { headers: { authorization: '' } }), 401, 'UNAUTHORIZED', /cluster secret/);
  expectError(await node.post(RECORDS_PATH, body, { headers: { authorization: 'Bearer wrong-secret' } }), 401, 'UNAUTHORIZED');
  expectError(await node.post(RECORDS_PATH, body, { headers: { authorization: `Bearer ${server.client.token}` } }), 401, 'UNAUTHORIZED');
  expectError(await node.post(RECORDS_PATH, '{not json', { headers: { authorization: 'Bearer wrong-secret' } }), 401, 'UNAUTHORIZED');
});

test('a malformed body is 400 INVALID_REQUEST naming what is wrong', async () => {
  const ok = encodeMsgId({ partition: 0, kind: MsgKind.user, counter: 1 });
  const cases: Array<[unknown, RegExp]> = [
    ['{not json', /not valid JSON/],
    [{}, /ids/],
    [{ ids: 'x' }, /array/],
    [{ ids: ['0001zz'] }, /must be a message id: 16 lower-case hex digits/],
    [{ ids: [ok], more: 1 }, /unknown field "more"/],
    [{ ids: Array.from({ length: 1001 }, () => ok) }, /ids must have at most 1000 items/],
    [{ ids: [encodeMsgId({ partition: 200, kind: MsgKind.user, counter: 1 })] }, /not of this store's partitions 0\.\.7/],
  ];
  for (const [body, message] of cases) {
    expectError(await node.post(RECORDS_PATH, body), 400, 'INVALID_REQUEST', message);
  }
});

test('with the secret it answers this store\'s records in the order asked, null for a missing one', async () => {
  const sent = await server.client.post('/v1/messages', { to: 'hana', type: 'test.rr', data: { s: 'é\u0000🌍' } });
  assert.equal(sent.status, 201, sent.text);
  const id = (sent.body as { id: string }).id;
  const missing = encodeMsgId({ partition: 7, kind: MsgKind.user, counter: 999_999 });
  const answer = await node.post(RECORDS_PATH, { ids: [missing, id] });
  assert.equal(answer.status, 200, answer.text);
  const body = answer.body as { store: string; records: [null, Record<string, unknown>] };
  assert.match(body.store, /^[0-9a-f]{16}$/);
  assert.equal(body.records[0], null);
  assert.deepEqual({ ...body.records[1], ts: 0, expiresAt: 0 }, { id, kind: 1, type: 'test.rr', data: { s: 'é\u0000🌍' }, to: ['hana'], ts: 0, expiresAt: 0 });
  // No id: the answer names the store only (a node checking its advertised URL).
  const none = await node.post(RECORDS_PATH, { ids: [] });
  assert.equal(none.status, 200, none.text);
  assert.deepEqual(none.body, { store: body.store, records: [] });
});

test('a secret recreated in Redis (after a FLUSHALL) is picked up by the route', async () => {
  await direct.set(new Keys(PREFIX).clusterSecret(), 'a-recreated-cluster-secret');
  const rotated = new PixiuClient(server.service.url, 'a-recreated-cluster-secret');
  // The route re-reads the secret at most once per SECRET_REFRESH_MIN_MS.
  await waitUntil('the new secret is accepted', async () =>
    (await rotated.post(RECORDS_PATH, { ids: [encodeMsgId({ partition: 0, kind: MsgKind.user, counter: 1 })] })).status === 200,
  SECRET_REFRESH_MIN_MS * 5, 100);
  expectError(await node.post(RECORDS_PATH, { ids: [encodeMsgId({ partition: 0, kind: MsgKind.user, counter: 1 })] }), 401, 'UNAUTHORIZED');
});
