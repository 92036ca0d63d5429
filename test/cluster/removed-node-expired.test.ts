/**
 * A node removed after its messages' ttl passed, as README "Several nodes" advises (a
 * black-box tester's finding F6, walk21): the inbox entries of its messages record
 * when their content expires (`exp`, append-13.lua), so the other nodes take them for
 * `expired` gaps without asking the store that held them (src/delivery/entry-records.ts).
 * Before, each such entry was a read of an owner that is not running — UNAVAILABLE,
 * never a gap — and every user holding one stalled for good: no `welcome`, history 503,
 * until the partitions were retired. A message of the stopped node that has not
 * expired still waits for it (docs/decisions.md "A record whose owner cannot be read
 * now is UNAVAILABLE, never a gap").
 *
 * Two nodes E and H in this process on one Redis; H stores messages with a 1 s ttl,
 * and is stopped once they expired.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { untilClaiming } from '../harness/claims-probe.js';
import { startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, frameSaid as said, testToken, type Frame } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';

interface History {
  readonly messages: { seq: number; id: string }[];
  readonly gaps: { from: number; to: number; reason: string }[];
}

async function post(node: InProcessServer, to: string, data: unknown, ttl?: number): Promise<{ id: string; seq: number }> {
  const answer = await node.client.post('/v1/messages', { to, type: 't', data, ...(ttl === undefined ? {} : { ttl }) });
  assert.equal(answer.status, 201, answer.text);
  const body = answer.body as { id: string; recipients: { seq: number }[] };
  return { id: body.id, seq: body.recipients[0]?.seq ?? 0 };
}

test('a node stopped after its messages expired stalls no one: their entries are expired gaps on the other node (WebSocket and history); an unexpired one of it still waits (503, no welcome)', { timeout: 90_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const settings = { redisUrl: redis.url, storeDurability: 'relaxed', jwtSecret: JWT_SECRET } as const;
  const e = await startInProcess(t, settings);
  const h = await startInProcess(t, settings);
  const { inbox, redis: probe } = await openInbox(t, redis.url);
  await untilClaiming(h.client, probe, 'H');
  await untilClaiming(e.client, probe, 'E');

  // `ke`: seq 1 via E, 2 and 3 via H with a 1 s ttl, 4 via E. `kl`: one message via H
  // that does not expire (the default ttl), then one via E.
  const m1 = await post(e, 'ke', 1);
  const m2 = await post(h, 'ke', 2, 1);
  const m3 = await post(h, 'ke', 3, 1);
  const m4 = await post(e, 'ke', 4);
  assert.deepEqual([m1.seq, m2.seq, m3.seq, m4.seq], [1, 2, 3, 4]);
  const live = await post(h, 'kl', 'H, not expired');
  const after = await post(e, 'kl', 'E, after it');
  // The entries carry the records' expiry (`exp`), a second after they were stored.
  const entries = (await inbox.range('ke', 0, 10)).entries;
  assert.deepEqual(entries.map((x) => x.malformed === true ? 'malformed' : typeof x.exp), ['number', 'number', 'number', 'number']);

  // H is kept running until its ttl passed (the latest `exp` of H's two, on this clock), then stopped for good.
  const expiry = Math.max(...entries.slice(1, 3).map((x) => (x.malformed === true ? 0 : x.exp ?? 0)));
  await sleep(Math.max(0, expiry - Date.now() + 50));
  await h.service.close();
  await waitUntil('E sees H down', async () => (await e.client.get(`/v1/messages/${live.id}`)).status === 503, 10_000, 100);

  // History on E: the expired messages of H are gaps, not a 503.
  const page = await e.client.get('/v1/users/ke/messages?after_seq=0');
  assert.equal(page.status, 200, page.text);
  assert.deepEqual((page.body as History).messages.map((m) => m.id), [m1.id, m4.id]);
  assert.deepEqual((page.body as History).gaps, [{ from: 2, to: 3, reason: 'expired' }]);

  // A device on E is welcomed and told the gap, then gets what comes later.
  const device = await TestClient.connect(e.service.url, { token: await testToken(JWT_KEY, 'ke'), params: { device: 'd1' }, timeoutMs: 10_000 });
  t.after(() => device.close());
  assert.equal((await device.next(10_000)).t, 'welcome');
  const frames: string[] = [];
  for (let i = 0; i < 3; i++) frames.push(said(await device.next(10_000)));
  assert.deepEqual(frames, [`msg 1 ${m1.id}`, 'gap 2-3 expired', `msg 4 ${m4.id}`]);
  const m5 = await post(e, 'ke', 5);
  assert.equal(said(await device.next(10_000)), `msg 5 ${m5.id}`);

  // `kl`'s message of H has not expired: it waits for H, as before (never a gap).
  expectError(await e.client.get('/v1/users/kl/messages?after_seq=0'), 503, 'UNAVAILABLE', /whose lease has lapsed|cannot be read now/);
  const waiting = await TestClient.connect(e.service.url, { token: await testToken(JWT_KEY, 'kl'), params: { device: 'd1' }, timeoutMs: 10_000 });
  t.after(() => waiting.close());
  await assert.rejects(waiting.next(3000), /./, 'no welcome while the first message waits for its node');
  // Its message after it stays behind it (order is kept).
  assert.ok(after.seq === 2 && live.seq === 1);
});
