/**
 * Presence entries live on refreshes (DESIGN.md §4 `conns`, §9): each entry carries its
 * own expiry, and the server's heartbeat of the connection extends it. A connection
 * that stays open for several entry lifetimes stays listed by
 * `GET /v1/users/{uid}/presence` the whole time; once its node dies (SIGKILL: nothing
 * removes the entry) it drops out within about one lifetime, while the dead node is
 * still registered (a registration outlives a presence entry), so the entry's own
 * expiry is what removes it.
 *
 * The node holding the connection is a real `pixiu serve` child with a short heartbeat
 * (`PIXIU_HEARTBEAT`), so it can be killed; presence is read from a second node in this
 * process on the same Redis and prefix, and straight from Redis.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, spawnServe, startInProcess, tempDataDir, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken, type Frame } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from './gateway-fixture.js';
import type { ConnectionView as Conn } from '../../src/gateway/presence-routes.js';

const PREFIX = 'pres:';
const API_TOKEN = 'presence-refresh-test-api-token';
/** The serving node's heartbeat: it pings and refreshes presence this often. */
const HEARTBEAT_MS = 200;
/** How many entry lifetimes the connection stays open: past its first, so only refreshes keep it (two: the suite's time budget). */
const LIFETIMES = 2;
/** Slack for scheduling on a loaded machine, ms. */
const MARGIN_MS = 2000;

let redis: RedisServer;
let raw: Redis;
const keys = new Keys(PREFIX);
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  ({ redis: raw } = await openInbox(cleanup, redis.url, PREFIX));
});

after(async () => {
  // The private redis-server must die even when a clean-up step fails, or the run hangs.
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});


/** The connection ids `node` reports for `user`. */
async function listed(node: InProcessServer, user: string): Promise<string[]> {
  const answer = await node.client.get(`/v1/users/${user}/presence`);
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { connections: Conn[] }).connections.map((c) => c.conn);
}

/** The raw presence entry of `conn` (`<expiresAtMs>|<node>|<device>|<sinceMs>`), parsed; undefined when absent. */
async function rawEntry(user: string, conn: string): Promise<{ expiresAt: number; node: string; since: number } | undefined> {
  const value = await raw.hget(keys.conns(user), conn);
  if (value === null) return undefined;
  const m = /^(\d+)\|([^|]+)\|[^|]+\|(\d+)$/.exec(value);
  assert.ok(m, `entry ${value}`);
  return { expiresAt: Number(m[1]), node: m[2] as string, since: Number(m[3]) };
}

test('a connection open for several presence lifetimes stays listed, and drops out within one lifetime of its node being killed', { timeout: 90_000 }, async (t) => {
  const serving = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: PREFIX, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info',
    PIXIU_HEARTBEAT: `${HEARTBEAT_MS}ms`, PIXIU_STORE_DURABILITY: 'relaxed',
  }, t);
  const reader = await startInProcess(t, { redisUrl: redis.url, redisPrefix: PREFIX, storeDurability: 'relaxed' });

  const client = await TestClient.connect(serving.url, { token: await testToken(JWT_KEY, 'rita'), params: { device: 'phone' } });
  t.after(() => client.close());
  const welcome: Frame = await client.next();
  assert.equal(welcome.t, 'welcome', JSON.stringify(welcome));
  const conn = welcome.conn as string;

  // The entry's lifetime is what the serving node gave it on connect: its expiry minus its start.
  const first = await rawEntry('rita', conn);
  assert.ok(first !== undefined, 'the connection has a presence entry');
  const lifetimeMs = first.expiresAt - first.since;
  assert.ok(lifetimeMs > 2 * HEARTBEAT_MS, `a lifetime of ${lifetimeMs} ms outlasts a missed heartbeat`);
  assert.deepEqual(await listed(reader, 'rita'), [conn]);

  // Every server heartbeat pings the socket: on each ping, the other node still lists
  // the connection, for LIFETIMES lifetimes after it connected.
  const openUntil = first.since + LIFETIMES * lifetimeMs;
  let pings = 0;
  while (Date.now() < openUntil) {
    await once(client.ws, 'ping', { signal: AbortSignal.timeout(lifetimeMs) });
    pings += 1;
    assert.deepEqual(await listed(reader, 'rita'), [conn], `listed at ping ${pings}, ${Date.now() - first.since} ms after connecting`);
  }
  assert.ok(pings >= LIFETIMES * lifetimeMs / HEARTBEAT_MS / 2, `${pings} heartbeats`);
  const refreshed = await rawEntry('rita', conn);
  assert.ok(refreshed !== undefined);
  assert.equal(refreshed.since, first.since, 'the same entry, extended');
  assert.ok(refreshed.expiresAt > openUntil, `refreshed: expires at ${refreshed.expiresAt}, past ${openUntil}`);

  // The node dies: nothing removes the entry, and its registration outlives the entry.
  const killedAt = Date.now();
  await serving.kill();
  assert.equal((await client.waitClose()).code, 1006);
  assert.deepEqual(await listed(reader, 'rita'), [conn], 'still listed until the entry expires');
  await waitUntil('the dead node\'s connection drops out of presence', async () => (await listed(reader, 'rita')).length === 0,
    lifetimeMs + MARGIN_MS);
  const goneAfterMs = Date.now() - killedAt;
  assert.ok(goneAfterMs <= lifetimeMs + MARGIN_MS, `gone ${goneAfterMs} ms after the kill (lifetime ${lifetimeMs} ms)`);
  const registration = await raw.zscore(keys.nodes(), refreshed.node);
  assert.ok(registration !== null && Number(registration) > Date.now(), 'the dead node was still registered: the entry expired on its own');
  assert.equal(await rawEntry('rita', conn), undefined, 'and the entry is gone from Redis');
});
