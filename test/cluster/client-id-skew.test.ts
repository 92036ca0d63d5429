/**
 * A `client_msg_id` claim settled by a node whose clock is behind Redis's
 * (src/cluster/client-id-claims.ts; DESIGN.md §3, §9): the claim must live as long as
 * its message, on Redis's clock, which expires it. Two `pixiu serve` nodes on one Redis
 * (so claims are made), B's clock {@link SKEW_MS} behind (test/harness/clock-offset.mjs,
 * as test/rooms/clock-skew.test.ts does). Before, B gave Redis the message's expiry by
 * its own clock (`PXAT`): the claim lapsed 20 s early — a message of a 10 s `ttl` left
 * none at all — and a retry on A stored and delivered the message a second time.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import { CLI_MAIN, cleanupList, PixiuClient, spawnListening, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';

const TOKEN = 'client-id-skew-token-0123456789';
/** How far node B's clock runs behind Redis's (and A's), ms. */
const SKEW_MS = 20_000;
/** The message's ttl, s: shorter than the skew, so a claim expiring by B's clock is gone at once. */
const TTL_S = 10;

test('a claim settled by a node whose clock is behind Redis\'s lives as long as its message, on Redis\'s clock', { timeout: 60_000 }, async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const server = await RedisServer.start();
  files.after(() => server.destroy());
  const { redis } = await openInbox(files, server.url);
  const env = async (): Promise<Record<string, string>> => ({
    PIXIU_REDIS_URL: server.url, PIXIU_DATA_DIR: await tempDataDir(files), PIXIU_PORT: '0', PIXIU_API_TOKEN: TOKEN,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed',
  });
  const preload = new URL('../harness/clock-offset.mjs', import.meta.url).pathname;
  const a = await spawnListening([CLI_MAIN, 'serve'], await env(), files);
  const b = await spawnListening(['--import', preload, CLI_MAIN, 'serve'], { ...(await env()), CLOCK_OFFSET_MS: String(-SKEW_MS) }, files);
  const body = { to: 'u1', type: 't', data: { n: 1 }, client_msg_id: 'skewed-1', ttl: TTL_S };
  const sent = await new PixiuClient(b.url, TOKEN).post('/v1/messages', body);
  assert.equal(sent.status, 201, sent.text);
  const { id } = sent.body as { id: string };
  // A retry on A is the first message's duplicate, not a second message.
  const retry = await new PixiuClient(a.url, TOKEN).post('/v1/messages', body);
  assert.equal(retry.status, 200, retry.text);
  assert.deepEqual([(retry.body as { id: string }).id, (retry.body as { duplicate: boolean }).duplicate], [id, true]);
  const claim = new Keys('px:').clientIdClaim('skewed-1');
  assert.equal(await redis.get(claim), id, 'settled to the message');
  // The message's 10 s, less the moments since it was stored.
  const ttlMs = await redis.pttl(claim);
  assert.ok(ttlMs > TTL_S * 1000 - 5000 && ttlMs <= TTL_S * 1000, `the claim lives ${ttlMs} ms of the message's ${TTL_S} s`);
});
