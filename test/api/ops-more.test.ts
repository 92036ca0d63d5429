/**
 * More of the operations routes (DESIGN.md §7), each on a real socket and a private
 * redis-server: `/readyz` is 503 when the message store is not open, even with Redis
 * answering; `pixiu_redis_errors_total` counts a Redis outage while it lasts; and a
 * Redis that refuses writes (full) is named as such by `/readyz` and by the 503 of a
 * request and of a WebSocket handshake; a message to a user is refused so too, appending
 * nothing, while reads and acks go on (the scripts' `#!lua` flags, docs/decisions.md
 * "maxmemory").
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { buildApp } from '../../src/api/app.js';
import { Metrics } from '../../src/api/metrics.js';
import { ClusterSecret } from '../../src/cluster/cluster-secret.js';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { StoreDirectory } from '../../src/cluster/store-directory.js';
import { StoreRouter } from '../../src/cluster/store-router.js';
import { loadConfig } from '../../src/config/config.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { APPEND_SHA } from '../../src/inbox/scripts.js';
import { Ingest } from '../../src/ingest/ingest.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { MessageStore } from '../../src/store/message-store.js';
import { expectError, metricSample, waitUntil } from '../harness/checks.js';
import { PixiuClient, cleanupList, startInProcess, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { Refused, TestClient, testToken } from '../harness/ws-client.js';

const API_TOKEN = 'ops-more-test-api-token-0123456789';
/** Longest the service's client may take to reconnect (its back-off tops out at 2 s). */
const RECOVERY_BOUND_MS = 15_000;

let redis: RedisServer;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  // Registered first, so it runs last, and runs even when an earlier step fails.
  files.after(() => redis.destroy());
});

after(() => files.run());

test('/readyz is 503 UNAVAILABLE once the message store is closed, though Redis answers PING', async (t) => {
  // The service closes HTTP before the store, so its own /readyz never sees a closed
  // store: the HTTP app is assembled here as the service assembles it (the store
  // behind a StoreRouter), on a real store and Redis, to close the store under it.
  const dataDir = await tempDataDir(t);
  const config = loadConfig({}, { claimsSettleMs: '0', redisUrl: redis.url, redisPrefix: 'ready:', dataDir, port: '0', logLevel: 'silent', apiToken: API_TOKEN });
  const logger = createLogger(config.logLevel);
  const client: Redis = await createRedis({ url: redis.url, commandTimeoutMs: config.redisCommandTimeoutMs, name: 'pixiu:test' });
  t.after(() => client.disconnect());
  const keys = new Keys(config.redisPrefix);
  const store = await MessageStore.open({
    dir: path.join(dataDir, 'xiu'), partitions: 1, sync: false, cacheBytes: 0, defaultTtlMs: config.messageTtlMs,
    maxMessageBytes: config.maxMessageBytes, sweepIntervalMs: config.sweepIntervalMs,
  });
  t.after(() => store.close());
  const records = new StoreRouter({
    local: store, owners: new StoreDirectory(new PartitionClaims(client, keys)), auth: await ClusterSecret.load(client, keys),
    timeoutMs: config.redisCommandTimeoutMs, cacheBytes: 0,
  });
  const inbox = new Inbox(client, { prefix: config.redisPrefix, cap: config.inboxCap });
  const app = await buildApp({
    config, store: records, inbox, ingest: new Ingest({ store, inbox }), redis: client, metrics: new Metrics(), apiToken: API_TOKEN,
  }, logger);
  t.after(() => app.close());
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  const api = new PixiuClient(url, API_TOKEN);

  const ready = await api.get('/readyz', { headers: { authorization: '' } });
  assert.equal(ready.status, 200, `ready while the store is open: ${ready.text}`);
  await store.close();
  assert.equal(await client.ping(), 'PONG', 'Redis still answers');
  const notReady = await api.get('/readyz', { headers: { authorization: '' } });
  expectError(notReady, 503, 'UNAVAILABLE', /the message store is not open/);
  assert.equal((await api.get('/healthz')).status, 200, 'liveness holds');
});

test('pixiu_redis_errors_total rises while Redis is down (failed requests and reconnects), and ingest works after Redis is back', { timeout: 60_000 }, async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'rerr:', redisCommandTimeoutMs: '500' });
  const metrics = async (): Promise<{ request: number; connection: number }> => {
    const answer = await client.get('/metrics', { headers: { authorization: '' } });
    assert.equal(answer.status, 200, 'metrics answer without Redis');
    return {
      request: metricSample(answer.text, 'pixiu_redis_errors_total{kind="request"}') ?? 0,
      connection: metricSample(answer.text, 'pixiu_redis_errors_total{kind="connection"}') ?? 0,
    };
  };
  assert.equal((await client.post('/v1/messages', { to: 'rex', type: 't', data: 1 })).status, 201);
  const before = await metrics();
  assert.deepEqual(before, { request: 0, connection: 0 }, 'no errors while Redis is up');

  await redis.stop();
  try {
    expectError(await client.post('/v1/messages', { to: 'rex', type: 't', data: 2 }), 503, 'UNAVAILABLE');
    const afterOne = await metrics();
    assert.equal(afterOne.request, before.request + 1, 'the failed request is counted');
    expectError(await client.get('/v1/users/rex/messages'), 503, 'UNAVAILABLE');
    assert.equal((await metrics()).request, before.request + 2, 'and the next');
    // A batch answers 200 with an error per item: each item that met Redis down counts.
    const batch = await client.post('/v1/messages/batch', { messages: [{ to: 'rex', type: 't', data: 4 }, { to: 'rey', type: 't', data: 5 }] });
    assert.equal(batch.status, 200, batch.text);
    assert.deepEqual((batch.body as { results: { status: number }[] }).results.map((r) => r.status), [503, 503]);
    assert.equal((await metrics()).request, before.request + 4, 'each failed batch item');
    // The service's connection retries on its own back-off; each refused try counts.
    await waitUntil('a failed reconnect is counted', async () => (await metrics()).connection > before.connection, RECOVERY_BOUND_MS);
  } finally {
    await redis.restart();
  }
  // (Each 503 from /readyz while the client reconnects counts as a failed request too.)
  await waitUntil('/readyz is 200 again', async () => (await client.get('/readyz')).status === 200, RECOVERY_BOUND_MS);
  const recovered = await metrics();
  const back = await client.post('/v1/messages', { to: 'rex', type: 't', data: 3 });
  assert.equal(back.status, 201, back.text);
  assert.equal((await metrics()).request, recovered.request, 'a request that succeeds is not counted');
});

test('/readyz is 503 while Redis answers but refuses writes (full, maxmemory-policy noeviction), naming the refusal; 200 again once it takes them', async (t) => {
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'full:' });
  const admin: Redis = await createRedis({ url: redis.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  t.after(() => admin.quit());
  assert.equal((await client.get('/readyz')).status, 200);
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', '1');
  try {
    assert.equal(await admin.ping(), 'PONG', 'Redis answers PING');
    expectError(await client.get('/readyz'), 503, 'UNAVAILABLE', /^Redis refuses writes: it is out of memory \(maxmemory\)$/);
    assert.equal((await client.get('/healthz')).status, 200, 'liveness holds');
  } finally {
    await admin.config('SET', 'maxmemory', '0');
  }
  assert.equal((await client.get('/readyz')).status, 200, 'ready again');
});

test('a POST and a WebSocket handshake while Redis refuses writes (full) are 503 UNAVAILABLE naming the cause, as /readyz does, with Retry-After', async (t) => {
  const { client, service } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'full-req:' });
  const admin: Redis = await createRedis({ url: redis.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  t.after(() => admin.quit());
  const token = await testToken(service.secrets.jwt, 'oomer');
  const members = await client.request('PUT', '/v1/rooms/oom-room/members', { body: { users: ['oomer', 'oomed'] } });
  assert.equal(members.status, 200, members.text);
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', '1');
  const fullMessage = /^Redis refuses writes: it is out of memory \(maxmemory\); retry later$/;
  // A producer's write route says what may have been done, and how to retry (src/api/retry-advice.ts).
  const fullPost = /^Redis refuses writes: it is out of memory \(maxmemory\); the message may have been stored and appended anyway: retry later with the same client_msg_id, /;
  const roomMessage = { room: 'oom-room', type: 't', data: 1, client_msg_id: 'oom-1' };
  try {
    // A room message: its fan-out is refused (room-time-1.lua, before anything is stored).
    const post = await client.post('/v1/messages', roomMessage);
    expectError(post, 503, 'UNAVAILABLE', fullPost);
    assert.equal(post.headers.get('retry-after'), '1');
    const refusal = await TestClient.connect(service.url, { token, params: { device: 'phone' } }).then(
      async (ws) => { await ws.close(); return assert.fail('the handshake connected while Redis refuses writes'); },
      (err: unknown) => err,
    );
    assert.ok(refusal instanceof Refused, String(refusal));
    expectError({ status: refusal.status, headers: refusal.headers, text: refusal.text, body: refusal.body, elapsedMs: 0 }, 503, 'UNAVAILABLE', fullMessage);
    assert.equal(refusal.headers.get('retry-after'), '1');
  } finally {
    await admin.config('SET', 'maxmemory', '0');
  }
  const again = await client.post('/v1/messages', roomMessage);
  assert.equal(again.status, 201, again.text);
});

/** Fills Redis as far as writes go: `maxmemory 1` under `noeviction`, so every write that may grow memory is refused (OOM). */
async function refuseWrites(admin: Redis): Promise<void> {
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', '1');
}

/**
 * The words of a 503 of POST /v1/messages caused by Redis's OOM refusal
 * (src/redis/state-replies.ts), and what may have been done (src/api/retry-advice.ts).
 */
const FULL = /^Redis refuses writes: it is out of memory \(maxmemory\); the message may have been stored and appended anyway: retry later with the same client_msg_id, /;
/** The same, of a message sent without client_msg_id. */
const FULL_UNKEYED = /^Redis refuses writes: it is out of memory \(maxmemory\); the message may have been stored and appended anyway: this request had no client_msg_id, so a retry may store it a second time /;
/** The same, of a batch item. */
const FULL_ITEM = /^Redis refuses writes: it is out of memory \(maxmemory\); the message may have been stored and appended anyway: retry the item later with the same client_msg_id, /;

test('a message to a user while Redis refuses writes (full) is 503 with Retry-After naming the cause and appends nothing, single or batch, after SCRIPT FLUSH too; its retry once Redis takes writes is stored once', async (t) => {
  // append-7.lua's first write, for a user without an inbox, is a DEL, which Redis does
  // not check for memory; without its #!lua line Redis let the rest of it through (201).
  const prefix = 'full-user:';
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: prefix });
  const admin: Redis = await createRedis({ url: redis.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  t.after(() => admin.quit());
  const keys = new Keys(prefix);
  assert.equal((await client.post('/v1/messages', { to: 'oom-known', type: 't', data: 0 })).status, 201);
  const single = { to: 'oom-new', type: 't', data: 1, client_msg_id: 'oom-user-1' };
  const known = { to: 'oom-known', type: 't', data: 2, client_msg_id: 'oom-user-2' };
  const items = [{ to: 'oom-new', type: 't', data: 3, client_msg_id: 'oom-batch-1' }, { to: 'oom-other', type: 't', data: 4, client_msg_id: 'oom-batch-2' }];
  await refuseWrites(admin);
  try {
    for (const [message, words] of [[single, FULL], [known, FULL], [{ to: 'oom-new', type: 't', data: 5 }, FULL_UNKEYED]] as const) {
      const post = await client.post('/v1/messages', message);
      expectError(post, 503, 'UNAVAILABLE', words);
      assert.equal(post.headers.get('retry-after'), '1');
    }
    // The EVALSHA meets NOSCRIPT and goes again as EVAL: Redis reads the flags from its text.
    await admin.script('FLUSH');
    expectError(await client.post('/v1/messages', single), 503, 'UNAVAILABLE', FULL);
    const batch = await client.post('/v1/messages/batch', { messages: items });
    assert.equal(batch.status, 200, batch.text);
    assert.equal(batch.headers.get('retry-after'), '1');
    const results = (batch.body as { results: Array<{ status: number; error?: { code: string; message: string } }> }).results;
    assert.deepEqual(results.map((r) => [r.status, r.error?.code]), [[503, 'UNAVAILABLE'], [503, 'UNAVAILABLE']], batch.text);
    for (const r of results) assert.match(r.error?.message ?? '', FULL_ITEM);
    const made = ['oom-new', 'oom-other'].flatMap((uid) => [keys.inbox(uid), keys.meta(uid), keys.ids(uid), keys.acks(uid)]);
    assert.equal(await admin.exists(...made), 0, 'no inbox made');
    assert.equal(await admin.xlen(keys.inbox('oom-known')), 1, 'nothing appended to an inbox');
  } finally {
    await admin.config('SET', 'maxmemory', '0');
  }
  // Refused, the EVAL loaded nothing: the retry meets NOSCRIPT and is sent again too.
  assert.deepEqual(await admin.script('EXISTS', APPEND_SHA), [0]);
  const stored = await client.post('/v1/messages', single);
  assert.equal(stored.status, 201, stored.text);
  const again = await client.post('/v1/messages', single);
  assert.equal(again.status, 200, again.text);
  assert.equal((again.body as { id: string }).id, (stored.body as { id: string }).id);
  assert.equal((await client.post('/v1/messages', known)).status, 201);
  const retried = await client.post('/v1/messages/batch', { messages: items });
  assert.deepEqual((retried.body as { results: Array<{ status: number }> }).results.map((r) => r.status), [201, 201], retried.text);
  const ids = async (uid: string): Promise<string[]> =>
    (await admin.xrange(keys.inbox(uid), '-', '+')).map(([, fields]) => fields[fields.indexOf('id') + 1] ?? '');
  const newIds = await ids('oom-new');
  assert.equal(newIds.length, 2, 'the single message and the batch item, once each');
  assert.equal(newIds[0], (stored.body as { id: string }).id);
  assert.equal((await ids('oom-known')).length, 2);
  assert.equal((await ids('oom-other')).length, 1);
});

test('while Redis refuses writes (full), inbox reads and acks go on: GET /v1/me/messages 200, POST /v1/me/ack and a WebSocket ack move the cursor', async (t) => {
  const prefix = 'full-read:';
  const { client, service } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: prefix });
  const admin: Redis = await createRedis({ url: redis.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
  t.after(() => admin.quit());
  const keys = new Keys(prefix);
  const token = await testToken(service.secrets.jwt, 'oom-reader');
  for (const data of [1, 2]) assert.equal((await client.post('/v1/messages', { to: 'oom-reader', type: 't', data })).status, 201);
  const ws = await TestClient.connect(service.url, { token, params: { device: 'phone' } });
  t.after(() => ws.close());
  await ws.msgs(2);
  await refuseWrites(admin);
  try {
    const me = new PixiuClient(service.url, token);
    const page = await me.get('/v1/me/messages');
    assert.equal(page.status, 200, page.text);
    const ack = await me.post('/v1/me/ack', { device: 'tablet', seq: 2 });
    assert.equal(ack.status, 200, ack.text);
    assert.equal((ack.body as { cursor: number }).cursor, 2);
    ws.ack(2);
    await waitUntil('the WebSocket ack is written', async () => (await admin.hget(keys.acks('oom-reader'), 'phone')) === '2');
  } finally {
    await admin.config('SET', 'maxmemory', '0');
  }
});
