/**
 * Bad input to `POST /v1/broadcast` (DESIGN.md §7, §8): each case is answered with
 * its status and the JSON error body, and publishes nothing — the broadcast stream's
 * length does not change, a connected client receives nothing (the next frame it gets
 * is a good broadcast posted afterwards), and nothing was stored (that broadcast's
 * MsgID is the store's first).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { assertFirstMinted, expectError, openInbox } from '../harness/checks.js';
import { cleanupList, type HttpAnswer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { expectFrame, nextBcast, postBroadcast } from './broadcast-fixture.js';

const cleanup = cleanupList();
let redis: RedisServer;
let gw: GatewayFixture;
let admin: Redis;
let client: TestClient;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', partitions: '1' });
  admin = (await openInbox(cleanup, redis.url)).redis;
  client = await gw.connect('watcher');
  await expectFrame(client, 'welcome');
});

after(() => cleanup.run());

const KiB = 1024;
const tags = (n: number): string[] => Array.from({ length: n }, (_, i) => `tag-${i}`);

/** Each bad request: its body (or raw text), the status and code it must get. */
const CASES: ReadonlyArray<{ name: string; body: unknown; status: number; code: string; message?: RegExp; headers?: Record<string, string> }> = [
  { name: 'unknown filter key', body: { type: 'x', data: 1, tags: { none: ['a'] } }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'unknown top-level key', body: { type: 'x', data: 1, audience: 'all' }, status: 400, code: 'INVALID_REQUEST' },
  { name: '1,000 tags in all', body: { type: 'x', data: 1, tags: { all: tags(1000) } }, status: 400, code: 'INVALID_REQUEST' },
  { name: '1,000 tags in any', body: { type: 'x', data: 1, tags: { any: tags(1000) } }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'an empty tag', body: { type: 'x', data: 1, tags: { all: ['ok', ''] } }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'a tag with a space', body: { type: 'x', data: 1, tags: { any: ['a b'] } }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'a non-string tag', body: { type: 'x', data: 1, tags: { all: ['ok', 5] } }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'an empty tag list', body: { type: 'x', data: 1, tags: { all: [] } }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'tags as a list', body: { type: 'x', data: 1, tags: ['a'] }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'missing type', body: { data: 1 }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'an empty type', body: { type: '', data: 1 }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'missing data', body: { type: 'x' }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'a negative ttl', body: { type: 'x', data: 1, ttl: -1 }, status: 400, code: 'INVALID_REQUEST' },
  { name: 'not JSON', body: '{"type":', status: 400, code: 'INVALID_REQUEST' },
  { name: 'data over 64 KiB', body: { type: 'x', data: 'x'.repeat(64 * KiB) }, status: 413, code: 'PAYLOAD_TOO_LARGE', message: /^message is \d+ bytes \(the UTF-8 JSON of \{type, data\}\), over the limit of 65536 bytes \(PIXIU_MAX_MESSAGE_BYTES\)$/ },
  // client_msg_id follows the rule of POST /v1/messages, and says so (an unknown field would be 400 too, in other words).
  { name: 'a client_msg_id of 129 characters', body: { type: 'x', data: 1, client_msg_id: 'k'.repeat(129) }, status: 400, code: 'INVALID_REQUEST', message: /^body\/client_msg_id must be 1–128 printable ASCII characters \(space to ~\)/ },
  { name: 'a client_msg_id outside printable ASCII', body: { type: 'x', data: 1, client_msg_id: 'cl\u00e9' }, status: 400, code: 'INVALID_REQUEST', message: /^body\/client_msg_id must be 1–128 printable ASCII characters/ },
  { name: 'an empty client_msg_id', body: { type: 'x', data: 1, client_msg_id: '' }, status: 400, code: 'INVALID_REQUEST', message: /^body\/client_msg_id must be 1–128 printable ASCII characters/ },
  { name: 'a client_msg_id that is no string', body: { type: 'x', data: 1, client_msg_id: 42 }, status: 400, code: 'INVALID_REQUEST', message: /^body\/client_msg_id must be a string/ },
  { name: 'no API token', body: { type: 'x', data: 1 }, status: 401, code: 'UNAUTHORIZED', headers: { authorization: '' } },
];

test('every bad broadcast gets its error body and publishes nothing', async () => {
  const before = await admin.xlen('px:broadcast');
  for (const c of CASES) {
    const answer: HttpAnswer = await gw.client.post('/v1/broadcast', c.body, c.headers ? { headers: c.headers } : {});
    expectError(answer, c.status, c.code, c.message);
    assert.equal(await admin.xlen('px:broadcast'), before, `${c.name}: the stream is unchanged`);
  }
  // Just under the limit is fine: the limit is on the encoded message, not far below it.
  const big = await postBroadcast(gw.client, { type: 'x', data: 'x'.repeat(63 * KiB) });
  // The client's next frame is the good broadcast: none of the bad ones reached it.
  const f = await nextBcast(client);
  assert.equal(f.bseq, big.bseq);
  assertFirstMinted(big.id, 'nothing was stored before the good broadcast', gw);
  assert.equal(await admin.xlen('px:broadcast'), before + 1);
});
