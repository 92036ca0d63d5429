/**
 * What a `client_msg_id` leaves in Redis, set by a node whose clock is behind Redis's
 * (DESIGN.md §3, §9): it must live as long as its message, on Redis's clock, which
 * expires it (src/redis/redis-clock.ts). Two `pixiu serve` nodes on one Redis (so
 * claims are made, once each has seen the other's store), B's clock {@link SKEW_MS} behind (test/harness/clock-offset.mjs, as
 * test/rooms/clock-skew.test.ts does); each case sends to B, then retries on A.
 *
 * - A message's claim (src/cluster/client-id-claims.ts). Before, B gave Redis the
 *   message's expiry by its own clock (`PXAT`): the claim lapsed 20 s early — a message
 *   of a 10 s `ttl` left none at all — and a retry on A stored and delivered the message
 *   a second time.
 * - A broadcast's marker (src/broadcast/broadcast-stream.ts, broadcast-publish-2.lua),
 *   the same way: the marker was gone at once, and a retry on A, answered the first
 *   MsgID by the claim, appended the broadcast to the stream a second time (201).
 *
 * A channel publication's marker is not concerned: it expires `PX` the history's ttl
 * from Redis's now (channel-publish-4.lua).
 */
import { before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import { CLI_MAIN, cleanupList, PixiuClient, spawnListening, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { untilClaiming } from '../harness/claims-probe.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';
import { entriesOf } from '../broadcast/broadcast-fixture.js';

const TOKEN = 'client-id-skew-token-0123456789';
/** How far node B's clock runs behind Redis's (and A's), ms. */
const SKEW_MS = 20_000;
/** The message's ttl, s: shorter than the skew, so a key expiring by B's clock is gone at once. */
const TTL_S = 10;

const keys = new Keys('px:');
const files = cleanupList();
let redis: Redis;
/** Node A (this machine's clock) and node B (its clock {@link SKEW_MS} behind). */
let a: PixiuClient;
let b: PixiuClient;

before(async () => {
  const server = await RedisServer.start();
  files.after(() => server.destroy());
  redis = (await openInbox(files, server.url)).redis;
  const env = async (): Promise<Record<string, string>> => ({
    PIXIU_REDIS_URL: server.url, PIXIU_DATA_DIR: await tempDataDir(files), PIXIU_PORT: '0', PIXIU_API_TOKEN: TOKEN,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed',
  });
  const preload = new URL('../harness/clock-offset.mjs', import.meta.url).pathname;
  const [nodeA, nodeB] = await Promise.all([
    spawnListening([CLI_MAIN, 'serve'], await env(), files),
    spawnListening(['--import', preload, CLI_MAIN, 'serve'], { ...(await env()), CLOCK_OFFSET_MS: String(-SKEW_MS) }, files),
  ]);
  a = new PixiuClient(nodeA.url, TOKEN);
  b = new PixiuClient(nodeB.url, TOKEN);
  // Each claims once it has seen the other's store (read every 5 s).
  await Promise.all([untilClaiming(a, redis, 'A'), untilClaiming(b, redis, 'B')]);
});

after(() => files.run());

/**
 * Asserts `key` lives as long as the message does on B, its storing node, less the
 * moments since it was set: its expiry counts from Redis's clock (the later of B's and
 * Redis's, src/store/record.ts), so {@link TTL_S} for the nodes in step with Redis, and
 * B, judging by its own clock {@link SKEW_MS} behind, serves it that much longer; the
 * key is given that moment on Redis's clock (redis-clock.ts), never less than the ttl.
 */
async function livesTheTtl(key: string, what: string): Promise<void> {
  const ttlMs = await redis.pttl(key);
  // Its expiry counts from Redis's clock less the second tolerated (record.ts).
  const lives = TTL_S * 1000 + SKEW_MS - 1000;
  assert.ok(ttlMs > lives - 5000 && ttlMs <= lives, `the ${what} lives ${ttlMs} ms, not the ${lives} ms its message lives on B`);
}

test('a claim settled by a node whose clock is behind Redis\'s lives as long as its message, on Redis\'s clock', { timeout: 60_000 }, async () => {
  const body = { to: 'u1', type: 't', data: { n: 1 }, client_msg_id: 'skewed-1', ttl: TTL_S };
  const sent = await b.post('/v1/messages', body);
  assert.equal(sent.status, 201, sent.text);
  const { id } = sent.body as { id: string };
  // A retry on A is the first message's duplicate, not a second message.
  const retry = await a.post('/v1/messages', body);
  assert.equal(retry.status, 200, retry.text);
  assert.deepEqual([(retry.body as { id: string }).id, (retry.body as { duplicate: boolean }).duplicate], [id, true]);
  const claim = keys.clientIdClaim('skewed-1');
  assert.equal(await redis.get(claim), id, 'settled to the message');
  await livesTheTtl(claim, 'claim');
});

test('a broadcast\'s marker set by a node whose clock is behind Redis\'s lives as long as the broadcast: a retry on another node appends nothing', { timeout: 60_000 }, async () => {
  const body = { type: 'test.news', data: { n: 1 }, client_msg_id: 'skewed-b1', ttl: TTL_S };
  const sent = await b.post('/v1/broadcast', body);
  assert.equal(sent.status, 201, sent.text);
  const { id, bseq } = sent.body as { id: string; bseq: string };
  const retry = await a.post('/v1/broadcast', body);
  assert.equal(retry.status, 200, retry.text);
  assert.deepEqual(retry.body, { id, bseq, duplicate: true });
  assert.deepEqual(await entriesOf(redis, id), [bseq], 'one stream entry');
  const marker = keys.broadcastMarker(id);
  assert.equal(await redis.get(marker), `${bseq}|`, 'the marker names the first append');
  await livesTheTtl(marker, 'marker');
});
