/**
 * A node's cache of records read from other nodes (src/cluster/store-router.ts) after
 * their node goes down and then after an operator retires that node's partitions
 * (README "Several nodes"; a black-box tester's finding, walk21 F1). Two nodes C and E
 * in this process on one Redis; E reads C's messages once (history), so they are in
 * E's cache; then C stops.
 *
 * - C down: E keeps serving what it had read of C (history, `GET` by id, a retry's
 *   `200 duplicate`), and only that: a message of C that E never read is 503 there
 *   (docs/decisions.md "Several nodes": a down owner's cached records stay served).
 * - C's partitions retired: within the directory's claim cache (5 s) E reads them as
 *   missing, cached or not: history gaps `expired`, `GET` 404, a retry stored anew under
 *   a new id, a new device told `gap … expired` — as a node that never read them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { CLAIM_CACHE_MS } from '../../src/cluster/store-directory.js';
import { Keys } from '../../src/redis/keys.js';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { untilClaiming } from '../harness/claims-probe.js';
import { startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, frameSaid as said, testToken, type Frame } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';

/** Partitions per store (the default). */
const P = 8;

interface History {
  readonly messages: { seq: number; id: string }[];
  readonly gaps: { from: number; to: number; reason: string }[];
}

async function post(node: InProcessServer, data: unknown, cid?: string): Promise<{ status: number; id: string; seq: number }> {
  const answer = await node.client.post('/v1/messages', { to: 'rt', type: 't', data, ...(cid === undefined ? {} : { client_msg_id: cid }) });
  assert.ok(answer.status === 200 || answer.status === 201, answer.text);
  const body = answer.body as { id: string; recipients: { seq: number }[] };
  return { status: answer.status, id: body.id, seq: body.recipients[0]?.seq ?? 0 };
}

async function history(node: InProcessServer): Promise<History> {
  const answer = await node.client.get('/v1/users/rt/messages?after_seq=0');
  assert.equal(answer.status, 200, answer.text);
  return answer.body as History;
}

test('a retired partition reads as missing on a node that had its records cached, within the claim cache\'s 5 s; while its node was only down, the cache served them', { timeout: 90_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const settings = { redisUrl: redis.url, storeDurability: 'relaxed', jwtSecret: JWT_SECRET } as const;
  const e = await startInProcess(t, settings);
  const c = await startInProcess(t, settings);
  const { redis: probe } = await openInbox(t, redis.url);
  await untilClaiming(c.client, probe, 'C');
  await untilClaiming(e.client, probe, 'E');

  const m1 = await post(e, 1);
  const m2 = await post(c, 2, 'rt-2');
  const m3 = await post(c, 3);
  const m4 = await post(e, 4);
  assert.deepEqual([m1.seq, m2.seq, m3.seq, m4.seq], [1, 2, 3, 4]);
  const never = await post(c, 'never read on E', 'rt-never');
  // E reads C's two messages once: they are in its cache now (not `never`, seq 5).
  const before = await e.client.get('/v1/users/rt/messages?after_seq=0&limit=4');
  assert.deepEqual((before.body as History).messages.map((m) => m.id), [m1.id, m2.id, m3.id, m4.id]);

  await c.service.close();
  // C down: what E read of it is served from E's cache, and nothing else of C.
  await waitUntil('E sees C down', async () => (await e.client.get(`/v1/messages/${never.id}`)).status === 503, 10_000, 100);
  expectError(await e.client.get(`/v1/messages/${never.id}`), 503, 'UNAVAILABLE', /whose lease has lapsed|cannot be read now/);
  assert.equal((await e.client.get(`/v1/messages/${m2.id}`)).status, 200);
  expectError(await e.client.post('/v1/messages', { to: 'rt', type: 't', data: 'never read on E', client_msg_id: 'rt-never' }), 503, 'UNAVAILABLE');
  assert.deepEqual(await post(e, 2, 'rt-2'), { status: 200, id: m2.id, seq: 2 }, 'a retry agrees with the read: the cached first message');

  // The operator retires C's partitions.
  const { partitionBase } = JSON.parse(await readFile(path.join(c.config.dataDir, 'xiu', 'LAYOUT'), 'utf8')) as { partitionBase: number };
  const retire = Array.from({ length: P }, (_, i) => [String(partitionBase + i), 'retired']).flat();
  await probe.hset(new Keys('px:').storePartitions(), ...retire);
  const retiredAt = performance.now();
  // Until then a page holding seq 5 is 503 (its message was never read on E).
  await waitUntil('E reads C\'s messages as missing', async () => (await e.client.get('/v1/users/rt/messages?after_seq=0')).status === 200, CLAIM_CACHE_MS + 5000, 100);
  const tookMs = performance.now() - retiredAt;
  assert.ok(tookMs < CLAIM_CACHE_MS + 1500, `within the claim cache's ${CLAIM_CACHE_MS} ms: ${Math.round(tookMs)} ms`);
  const page = await history(e);
  assert.deepEqual(page.messages.map((m) => m.id), [m1.id, m4.id]);
  assert.deepEqual(page.gaps, [{ from: 2, to: 3, reason: 'expired' }, { from: 5, to: 5, reason: 'expired' }]);
  expectError(await e.client.get(`/v1/messages/${m2.id}`), 404, 'NOT_FOUND');
  // The retry agrees: the first message is gone, so it is stored anew, under a new id.
  const again = await post(e, 2, 'rt-2');
  assert.equal(again.status, 201);
  assert.notEqual(again.id, m2.id);
  assert.equal(again.seq, 6);
  assert.deepEqual(await post(e, 2, 'rt-2'), { status: 200, id: again.id, seq: 6 });

  // A new device on E is told the gaps, as on a node that never read C.
  const device = await TestClient.connect(e.service.url, { token: await testToken(JWT_KEY, 'rt'), params: { device: 'd1' }, timeoutMs: 20_000 });
  t.after(() => device.close());
  assert.equal((await device.next(20_000)).t, 'welcome');
  const frames: string[] = [];
  for (let i = 0; i < 5; i++) frames.push(said(await device.next(20_000)));
  assert.deepEqual(frames, [`msg 1 ${m1.id}`, 'gap 2-3 expired', `msg 4 ${m4.id}`, 'gap 5-5 expired', `msg 6 ${again.id}`]);
});
