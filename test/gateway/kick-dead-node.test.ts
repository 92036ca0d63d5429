/**
 * The kicks of a node that died (SIGKILL) end quietly when its registration lapses
 * (src/gateway/kicks.ts): its clients reconnect to the surviving node, each replacing
 * an entry of the dead node, which is still registered (up to NODE_TTL_MS, 15 s, after
 * its last renewal), so each replacement's kick (4002) reaches no subscriber and is
 * sent again. Before, it was sent again for 10 s only, within the registration's
 * lifetime: the survivor then logged one warning per replaced connection, all at once
 * (a crash tester's L2: 82 lines). Now it is sent again until the registration could
 * have lapsed: once it has, the kicks stop, with nothing logged.
 *
 * The dying node is a real `pixiu serve` child, killed right after one of its
 * renewals, so its registration outlives the old 10 s by about 5 s; the survivor is in
 * this process, its log captured.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { capturingLogger } from '../harness/log-capture.js';
import { spawnServe, tempDataDir } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET, startGateway } from './gateway-fixture.js';

const PREFIX = 'kickdead:';
const API_TOKEN = 'kick-dead-node-test-api-token';
/** The dying node's clients, one device of one user each. */
const CLIENTS = 30;

let redis: RedisServer;
let probe: Redis;
fileRedis(async (ctx) => {
  ({ redis } = ctx);
  probe = (await openInbox(ctx.cleanup, redis.url, PREFIX)).redis;
});

/** Redis's clock, ms: what registrations expire by. */
async function redisNow(): Promise<number> {
  const [sec, usec] = await probe.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** How many PUBLISH commands Redis has run (INFO commandstats): only the node bus publishes here. */
async function publishes(): Promise<number> {
  const info = await probe.info('commandstats');
  return Number(/^cmdstat_publish:calls=(\d+)/m.exec(info)?.[1] ?? 0);
}

/** The kick warnings among the survivor's lines: the old one per connection, and the thinned one. */
const kickWarnings = (lines: ReadonlyArray<{ msg?: string }>): string[] =>
  lines.map((l) => String(l.msg)).filter((m) => /^kicks? not received/.test(m));

test('a node killed with many replaced connections: the survivor sends their kicks until its registration lapses, then stops them without a line per connection', { timeout: 90_000 }, async (t) => {
  const dying = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: PREFIX, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info', PIXIU_STORE_DURABILITY: 'relaxed',
  }, t);
  const { logger, lines } = capturingLogger();
  const survivor = await startGateway(t, { redisUrl: redis.url, redisPrefix: PREFIX, apiToken: API_TOKEN, storeDurability: 'relaxed' }, logger);

  const users = Array.from({ length: CLIENTS }, (_, i) => `crashed-${i}`);
  const olds = await Promise.all(users.map(async (user) => {
    const client = await TestClient.connect(dying.url, { token: await testToken(JWT_KEY, user), params: { device: 'phone' } });
    t.after(() => client.close());
    assert.equal((await client.next()).t, 'welcome');
    return client;
  }));
  const presence = await survivor.client.get(`/v1/users/${users[0]}/presence`);
  const node = (presence.body as { connections: Array<{ node: string }> }).connections[0]?.node;
  assert.ok(node !== undefined, presence.text);

  // Killed right after a renewal: its registration lives on for NODE_TTL_MS (15 s).
  const registrations = new Keys(PREFIX).nodes();
  const renewedBefore = Number(await probe.zscore(registrations, node));
  await waitUntil('a renewal of the dying node', async () => Number(await probe.zscore(registrations, node)) > renewedBefore, 10_000, 5);
  await dying.kill();
  const expiresAt = Number(await probe.zscore(registrations, node));
  await Promise.all(olds.map((c) => c.waitClose(5000)));

  // Every client reconnects to the survivor: each replaces the dead node's entry and kicks it.
  const publishedBefore = await publishes();
  await Promise.all(users.map((user) => survivor.connectWelcomed(user, { device: 'phone' })));
  assert.ok(await redisNow() < expiresAt, 'the replacements ran while the dead node was still registered');
  await waitUntil('the kicks sent again', async () => await publishes() >= publishedBefore + 2 * CLIENTS, 5000);

  // Its registration lapses; the kicks stop at their next try (every 250 ms).
  await waitUntil('the dead node\'s registration lapsed', async () => await redisNow() > expiresAt + 1000, 30_000, 100);
  const publishedAfter = await publishes();
  await waitUntil('a second more', async () => await redisNow() > expiresAt + 2000, 5000, 100);
  assert.equal(await publishes(), publishedAfter, 'no kick is sent once the registration lapsed');
  assert.deepEqual(kickWarnings(lines), [], 'the survivor logged no warning for kicks that ended with the dead node\'s registration');
});
