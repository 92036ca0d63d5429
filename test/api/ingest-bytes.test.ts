/**
 * The node's byte budget for messages in progress (docs/api.md, "Messages"): the bodies
 * of the `POST /v1/messages` and batches being sent on a node take at most 64 times
 * `PIXIU_MAX_BODY_BYTES` (64 MiB by default) at once; a request that does not fit beside
 * them is 503 UNAVAILABLE with Retry-After, stores nothing, and a request alone always
 * fits. Before, the only bound was the recipients in progress (200,000 by default): a
 * stall held 200,000 single-recipient messages of 60 KiB, some 13 GB (a reviewer's
 * finding). A message refused for itself (over the size limit: 413) is told so whatever
 * the load, as with the recipient budget. The real service, with a body limit of 4 KiB
 * (a budget of 256 KiB), and messages held in progress by a Redis that takes no writes
 * (CLIENT PAUSE WRITE).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import type { Inbox } from '../../src/inbox/inbox.js';
import { expectError, openInbox, readWholeInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import type { HttpAnswer } from '../harness/pixiu-server.js';

const BODY_LIMIT = 4096;
const BUDGET = 64 * BODY_LIMIT;

let gw: GatewayFixture;
let inbox: Inbox;
let probe: Redis;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, {
    redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '20s',
    maxBodyBytes: String(BODY_LIMIT), maxMessageBytes: '1024',
  });
  ({ inbox, redis: probe } = await openInbox(cleanup, redis.url));
});

/** `pixiu_ingest_bytes_in_progress` from the node's /metrics. */
async function bytesInProgress(): Promise<number> {
  return Number(/^pixiu_ingest_bytes_in_progress (\d+)/m.exec((await gw.client.get('/metrics', { headers: { authorization: '' } })).text)?.[1] ?? -1);
}

/** A message body of about 3.7 KB: 100 recipients (ids of 24 characters) and 900 bytes of data. */
function bigBody(k: number): { to: string[]; type: string; data: string } {
  return { to: Array.from({ length: 100 }, (_, i) => `bytes-${String(k).padStart(4, '0')}-${String(i).padStart(3, '0')}-xxxxxxx`), type: 't', data: 'd'.repeat(900) };
}

test('the bodies of messages in progress take at most 64 times PIXIU_MAX_BODY_BYTES: past it 503 with Retry-After, nothing stored; 413 still wins; all held are stored once Redis is back', async () => {
  const size = Buffer.byteLength(JSON.stringify(bigBody(0)));
  assert.ok(size > 3_000 && size < BODY_LIMIT, `body of ${size} bytes`);
  const fit = Math.floor(BUDGET / size);
  const sent = fit + 10;
  await probe.client('PAUSE', '20000', 'WRITE');
  let answers: HttpAnswer[];
  try {
    const posts = Array.from({ length: sent }, (_, k) => gw.client.post('/v1/messages', bigBody(k)));
    const refused: HttpAnswer[] = [];
    for (const p of posts) void p.then((a) => { if (a.status === 503) refused.push(a); });
    await waitUntil('the budget is full and the rest refused', async () => refused.length === sent - fit && (await bytesInProgress()) === fit * size);
    for (const answer of refused) {
      expectError(answer, 503, 'UNAVAILABLE', /^this node is busy with other messages \(\d+ bytes of messages in progress\); retry the message shortly$/);
      assert.equal(answer.headers.get('retry-after'), '1');
    }
    // Over the size limit is 413 whatever the load, single or in a batch of such items ...
    const tooLarge = { to: 'bytes-u', type: 't', data: 'x'.repeat(2000) };
    expectError(await gw.client.post('/v1/messages', tooLarge), 413, 'PAYLOAD_TOO_LARGE', /^message is \d+ bytes/);
    const bad = await gw.client.post('/v1/messages/batch', { messages: [tooLarge] });
    assert.equal(bad.status, 200, bad.text);
    assert.deepEqual((bad.body as { results: { status: number }[] }).results.map((r) => r.status), [413]);
    // ... and a batch with a good item beside it does not fit: refused whole.
    const mixed = await gw.client.post('/v1/messages/batch', { messages: [tooLarge, { to: 'bytes-v', type: 't', data: 1 }] });
    expectError(mixed, 503, 'UNAVAILABLE', /^this node is busy with other messages \(\d+ bytes of messages in progress\); retry the batch shortly$/);
    await probe.client('UNPAUSE');
    answers = await Promise.all(posts);
  } finally {
    await probe.client('UNPAUSE');
  }
  assert.equal(answers.filter((a) => a.status === 201).length, fit, 'every held message is stored and appended');
  assert.equal(await bytesInProgress(), 0, 'all given back');
  for (const user of ['bytes-u', 'bytes-v']) assert.equal((await readWholeInbox(inbox, user)).length, 0);
  // Alone, a body of any size fits.
  assert.equal((await gw.client.post('/v1/messages', bigBody(9999))).status, 201);
});
