/**
 * A stored record whose bytes cannot be decoded (src/store/unreadable.ts) costs its own
 * seq, never the ones after it: delivery sends a `gap` of that seq with reason
 * `undeliverable` between the messages around it (it used to retry the failed fetch
 * forever: no `welcome`, nothing after that seq); history lists it in `gaps` (it
 * answered 500); `GET /v1/messages/{id}` answers 404; the store logs it once at error,
 * however often it is read. A second node, reading the record from its owner over the
 * records route, shows the same gap and the same 404.
 *
 * The record is broken on disk while its node is stopped: a message is posted, the
 * service is stopped, and the record's bytes are cut short in its partition with
 * classic-level (its head, `{"expiresAt":…,`, still says it is live).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { messageKey } from '../../src/store/keys.js';
import { expectError } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, tempDataDir, type CleanupContext, type InProcessServer } from '../harness/pixiu-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { expectFrame, expectWelcome, postOne } from './delivery-fixture.js';
import { JWT_KEY, JWT_SECRET } from './gateway-fixture.js';

/** What the store logs for a record it cannot decode. */
const LOG_MSG = 'stored message cannot be decoded: it is delivered as a gap (reason undeliverable)';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/** Three messages to `user` on `server`: before, the one to break, after. */
async function postThree(server: InProcessServer, user: string): Promise<{ id: string; seq: number }[]> {
  const out: { id: string; seq: number }[] = [];
  for (const data of ['before', 'broken', 'after']) out.push(await postOne(server.client, user, { data }));
  return out;
}

/** Cuts record `id`'s stored bytes short in partition 0 of the (stopped) store of `dataDir`: no JSON any more. */
async function breakRecord(dataDir: string, id: string): Promise<void> {
  // Partition 0 of the store (src/service/service.ts: <dataDir>/xiu/<partition>).
  const db = new ClassicLevel<Buffer, Buffer>(path.join(dataDir, 'xiu', '0'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  const key = messageKey(id);
  const stored = (await db.get(key))?.toString('utf8') ?? '';
  assert.match(stored, /^\{"expiresAt":\d+,.*"data":"broken"/);
  await db.put(key, Buffer.from(stored.slice(0, stored.indexOf('"data":') + 9)));
  await db.close();
}

/** Connects `user` to `server` as `device`. */
async function connect(t: CleanupContext, server: InProcessServer, user: string, device: string): Promise<TestClient> {
  const client = await TestClient.connect(server.service.url, { token: await testToken(JWT_KEY, user), params: { device } });
  t.after(() => client.close());
  return client;
}

/** Connects, and checks the frames: welcome, the msg before, the gap of the broken seq, the msg after. */
async function expectAround(t: CleanupContext, server: InProcessServer, user: string, device: string, posted: { id: string; seq: number }[]): Promise<void> {
  const [first, broken, last] = posted as [typeof posted[0], typeof posted[0], typeof posted[0]];
  const client = await connect(t, server, user, device);
  await expectWelcome(client, 1, last.seq);
  const before = await expectFrame(client, 'msg');
  assert.deepEqual([before.seq, before.id, before.data], [first.seq, first.id, 'before']);
  assert.deepEqual(await expectFrame(client, 'gap'), { t: 'gap', from: broken.seq, to: broken.seq, reason: 'undeliverable' });
  const after = await expectFrame(client, 'msg');
  assert.deepEqual([after.seq, after.id, after.data], [last.seq, last.id, 'after']);
  client.ack(last.seq);
  await client.close();
}

/** Checks a history page of `user` read on `server`: the gap, and the two messages. */
async function expectHistory(server: InProcessServer, user: string, posted: { id: string; seq: number }[]): Promise<void> {
  const [first, broken, last] = posted as [typeof posted[0], typeof posted[0], typeof posted[0]];
  const history = await server.client.get(`/v1/users/${user}/messages`);
  assert.equal(history.status, 200, history.text.slice(0, 300));
  const page = history.body as { messages: { seq: number; id: string }[]; gaps: unknown };
  assert.deepEqual(page.gaps, [{ from: broken.seq, to: broken.seq, reason: 'undeliverable' }]);
  assert.deepEqual(page.messages.map((m) => [m.seq, m.id]), [[first.seq, first.id], [last.seq, last.id]]);
}

/** The store's lines about record `id`. */
function linesOf(lines: readonly LogLine[], id: string): LogLine[] {
  return lines.filter((l) => l.msg === LOG_MSG && l.msgId === id);
}

test('a record whose stored bytes cannot be decoded is a gap (undeliverable) between the messages around it, in delivery and history, and a 404 by id; logged once', async (t) => {
  const dataDir = await tempDataDir(t);
  const settings = { redisUrl: redis.url, redisPrefix: 'undecodable:', partitions: '1', dataDir, jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  const first = await startInProcess(t, settings);
  const posted = await postThree(first, 'ursula');
  await first.service.close();
  await breakRecord(dataDir, posted[1]?.id ?? '');

  const { logger, lines } = capturingLogger();
  const server = await startInProcess(t, settings, logger);
  // Twice, as a reconnect would: each time the same frames.
  await expectAround(t, server, 'ursula', 'phone', posted);
  await expectAround(t, server, 'ursula', 'laptop', posted);
  await expectHistory(server, 'ursula', posted);
  const broken = posted[1]?.id ?? '';
  expectError(await server.client.get(`/v1/messages/${broken}`), 404, 'NOT_FOUND', /cannot be decoded/);
  assert.equal((await server.client.get(`/v1/messages/${posted[0]?.id ?? ''}`)).status, 200);

  // Read five times (two devices, history, by id): one line, at error, naming the id and partition.
  const logged = linesOf(lines, broken);
  assert.equal(logged.length, 1, JSON.stringify(logged));
  assert.equal(logged[0]?.level, 50);
  assert.equal(logged[0]?.partition, 0);
  assert.match(String(logged[0]?.source), /xiu[/\\]0$/);
  // Counted once too, for an operator's alert.
  const metrics = (await server.client.get('/metrics', { headers: { authorization: '' } })).text;
  assert.match(metrics, /^pixiu_store_unreadable_records_total 1$/m);
  assert.equal((await server.client.get('/healthz')).status, 200);
});

test('a second node reading the broken record from its owner over the records route shows the same gap and the same 404', async (t) => {
  const prefix = 'undecodable-two:';
  const dirA = await tempDataDir(t);
  const settingsA = { redisUrl: redis.url, redisPrefix: prefix, partitions: '1', dataDir: dirA, jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  const first = await startInProcess(t, settingsA);
  const posted = await postThree(first, 'ulrich');
  await first.service.close();
  await breakRecord(dirA, posted[1]?.id ?? '');
  const a = await startInProcess(t, settingsA);

  const { logger, lines } = capturingLogger();
  const b = await startInProcess(t, { redisUrl: redis.url, redisPrefix: prefix, partitions: '1', dataDir: await tempDataDir(t), jwtSecret: JWT_SECRET }, logger);
  assert.notEqual(b.service.url, a.service.url);
  await expectAround(t, b, 'ulrich', 'phone', posted);
  await expectHistory(b, 'ulrich', posted);
  expectError(await b.client.get(`/v1/messages/${posted[1]?.id ?? ''}`), 404, 'NOT_FOUND', /cannot be decoded/);
  // B read every record from A (partition 0 is A's), and failed no read of it.
  assert.deepEqual(lines.filter((l) => l.msg === 'remote record read failed' || l.msg === 'delivery fetch failed, will retry'), []);
  // The record is A's: A logs and counts it, B read A's answer.
  assert.deepEqual(linesOf(lines, posted[1]?.id ?? ''), []);
  const metricsOf = async (node: InProcessServer): Promise<string> => (await node.client.get('/metrics', { headers: { authorization: '' } })).text;
  assert.match(await metricsOf(a), /^pixiu_store_unreadable_records_total 1$/m);
  assert.match(await metricsOf(b), /^pixiu_store_unreadable_records_total 0$/m);
});

test('a retry of a client_msg_id whose first record cannot be decoded is stored anew (201, a new id) and delivered after the gap, on its node and through another; a second retry is its duplicate', async (t) => {
  const prefix = 'undecodable-retry:';
  const dirA = await tempDataDir(t);
  const settingsA = { redisUrl: redis.url, redisPrefix: prefix, partitions: '1', dataDir: dirA, jwtSecret: JWT_SECRET, storeDurability: 'relaxed' };
  // A's store is known to this Redis before B starts, and B's before A starts again:
  // each sees the Redis shared at its start, so client_msg_id claims are written and
  // read from the first POST on (src/cluster/client-id-claims.ts).
  await (await startInProcess(t, settingsA)).service.close();
  const b = await startInProcess(t, { redisUrl: redis.url, redisPrefix: prefix, partitions: '1', dataDir: await tempDataDir(t), jwtSecret: JWT_SECRET });
  const first = await startInProcess(t, settingsA);
  const onA = { to: 'ulla', type: 'test.one', data: 'broken', client_msg_id: 'order-1' };
  const throughB = { to: 'ulf', type: 'test.one', data: 'broken', client_msg_id: 'order-2' };
  const bodies = [onA, throughB];
  const firstIds: string[] = [];
  for (const body of bodies) {
    const answer = await first.client.post('/v1/messages', body);
    assert.equal(answer.status, 201, answer.text);
    firstIds.push((answer.body as { id: string }).id);
  }
  await first.service.close();
  for (const id of firstIds) await breakRecord(dirA, id);
  const a = await startInProcess(t, settingsA);

  // order-1 retried on its own node (A), order-2 through B, which reads A's record.
  const cases: [InProcessServer, typeof onA, string | undefined][] = [[a, onA, firstIds[0]], [b, throughB, firstIds[1]]];
  for (const [server, body, firstId] of cases) {
    const retry = await server.client.post('/v1/messages', body);
    assert.equal(retry.status, 201, `${body.client_msg_id}: ${retry.text}`);
    const stored = retry.body as { id: string; duplicate: boolean; recipients: { user: string; seq: number }[] };
    assert.notEqual(stored.id, firstId, 'a new message: the first cannot be read');
    assert.deepEqual([stored.duplicate, stored.recipients], [false, [{ user: body.to, seq: 2 }]]);
    const again = await server.client.post('/v1/messages', body);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual([(again.body as { id: string }).id, (again.body as { duplicate: boolean }).duplicate], [stored.id, true]);

    const client = await connect(t, server, body.to, 'phone');
    await expectWelcome(client, 1, 2);
    assert.deepEqual(await expectFrame(client, 'gap'), { t: 'gap', from: 1, to: 1, reason: 'undeliverable' });
    const msg = await expectFrame(client, 'msg');
    assert.deepEqual([msg.seq, msg.id, msg.data], [2, stored.id, 'broken']);
    await client.close();
  }
});
