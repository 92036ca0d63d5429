/**
 * Several nodes on one Redis (DESIGN.md §2, §3, §9): two `pixiu serve` processes A and
 * B, each with its own data dir, port and API token, the same JWT secret.
 *
 * - They mint MsgIDs from disjoint partition blocks, so messages posted to both for
 *   one user all land in the inbox (none taken for a duplicate of another).
 * - A message stored on A is read by B from A (delivery, history, GET by id) and is
 *   never a `gap`; while A is stopped it cannot be read, which is a 503 (history) or a
 *   wait (delivery, which B's metrics show), and once A is back on the same data dir
 *   (same block) it is there.
 * - A client_msg_id used on one node, for a message or a broadcast, is answered as a
 *   duplicate on the other (the claim in Redis; a broadcast's marker): stored and
 *   appended once.
 * - A data dir claiming a block another store holds is refused at start.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { decodeMsgId, encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Keys } from '../../src/redis/keys.js';
import { expectError, metricSample, openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, PixiuClient, runCli, spawnServe, tempDataDir, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { untilClaiming } from '../harness/claims-probe.js';
import { TestClient, testToken, type Frame } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';

/** Partitions per store (the default). */
const P = 8;
/** How long one frame may take to come, ms: a retry after a failed remote read waits up to 4 s. */
const FRAME_MS = 20_000;

/** One node: its process, its client (with its own API token) and its data dir. */
interface Node {
  serve: ServeProcess;
  api: PixiuClient;
  readonly dataDir: string;
  readonly token: string;
}

const cleanup = cleanupList();
let redis: RedisServer;
let a: Node;
let b: Node;

function envOf(node: Pick<Node, 'dataDir' | 'token'>): Record<string, string> {
  return {
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: node.dataDir, PIXIU_PORT: '0', PIXIU_API_TOKEN: node.token,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed',
  };
}

async function start(dataDir: string, token: string): Promise<Node> {
  const serve = await spawnServe(envOf({ dataDir, token }), cleanup);
  return { serve, api: new PixiuClient(serve.url, token), dataDir, token };
}

/** The data dir's store LAYOUT (src/store/layout.ts). */
async function layoutOf(node: Pick<Node, 'dataDir'>): Promise<{ storeId: string; partitionBase: number }> {
  // Without writtenBy, which every serving build rewrites (README "Upgrades"): a commit
  // made while the suite runs changes it between a node's two starts.
  const { writtenBy: _build, ...layout } = JSON.parse(await readFile(path.join(node.dataDir, 'xiu', 'LAYOUT'), 'utf8')) as { storeId: string; partitionBase: number; writtenBy?: string };
  return layout;
}

/** Posts one message; returns its id and seq. */
async function post(node: Node, user: string, data: unknown): Promise<{ id: string; seq: number }> {
  const answer = await node.api.post('/v1/messages', { to: user, type: 'test.cluster', data });
  assert.equal(answer.status, 201, answer.text);
  const body = answer.body as { id: string; recipients: { user: string; seq: number }[] };
  return { id: body.id, seq: body.recipients[0]?.seq ?? 0 };
}

async function connect(node: Node, user: string, device: string): Promise<TestClient> {
  const client = await TestClient.connect(node.serve.url, { token: await testToken(JWT_KEY, user), params: { device }, timeoutMs: FRAME_MS });
  cleanup.after(() => client.close());
  return client;
}

async function expectFrame(client: TestClient, t: string): Promise<Frame> {
  const frame = await client.next(FRAME_MS);
  assert.equal(frame.t, t, `expected ${t}, got ${JSON.stringify(frame)}`);
  return frame;
}

/** What a node's `/metrics` say of stalled delivery: failed fetches reading records, and users stalled now. */
async function stallMetrics(node: Node): Promise<{ recordFailures: number; stalled: number }> {
  const { text } = await node.api.get('/metrics');
  const recordFailures = metricSample(text, 'pixiu_delivery_fetch_failures_total{read="records"}');
  const stalled = metricSample(text, 'pixiu_delivery_stalled_users');
  assert.ok(recordFailures !== undefined && stalled !== undefined, 'both delivery stall metrics are exported');
  return { recordFailures, stalled };
}

/** Waits until `node`'s stalled-users gauge reads `users`. */
async function stalledUsers(node: Node, users: number): Promise<void> {
  await waitUntil(`${users} stalled users`, async () => (await stallMetrics(node)).stalled === users, FRAME_MS);
}

/** The partition block a MsgID says it was minted in. */
function inBlock(id: string, base: number): boolean {
  const { partition } = decodeMsgId(id);
  return partition >= base && partition < base + P;
}

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const [dirA, dirB] = await Promise.all([tempDataDir(cleanup, 'pixiu-node-a-'), tempDataDir(cleanup, 'pixiu-node-b-')]);
  // One after the other, so that A takes the first block (either order would do).
  a = await start(dirA, 'node-a-api-token-0123456789');
  b = await start(dirB, 'node-b-api-token-9876543210');
});

after(() => cleanup.run());

test('the two data dirs mint from disjoint partition blocks; 200 messages posted alternately all land in the inbox, seqs 1..200', { timeout: 60_000 }, async () => {
  const [la, lb] = await Promise.all([layoutOf(a), layoutOf(b)]);
  assert.notEqual(la.storeId, lb.storeId);
  assert.deepEqual([la.partitionBase, lb.partitionBase].sort((x, y) => x - y), [0, P]);

  const posted: { id: string; seq: number; node: 'a' | 'b' }[] = [];
  for (let i = 0; i < 200; i += 20) {
    const round = await Promise.all(Array.from({ length: 20 }, (_, k) => {
      const node = (i + k) % 2 === 0 ? 'a' : 'b';
      return post(node === 'a' ? a : b, 'alice', { i: i + k }).then((r) => ({ ...r, node }) as const);
    }));
    posted.push(...round);
  }
  assert.equal(new Set(posted.map((p) => p.id)).size, 200, 'every message has its own id');
  assert.deepEqual(posted.map((p) => p.seq).sort((x, y) => x - y), Array.from({ length: 200 }, (_, i) => i + 1));
  for (const p of posted) assert.ok(inBlock(p.id, p.node === 'a' ? la.partitionBase : lb.partitionBase), `${p.id} from ${p.node}`);

  // Either node reads the whole inbox, half of it from the other node.
  for (const node of [a, b]) {
    const page = await node.api.get('/v1/users/alice/messages?limit=1000');
    assert.equal(page.status, 200, page.text);
    const body = page.body as { latest_seq: number; gaps: unknown[]; messages: { seq: number; id: string }[] };
    assert.equal(body.latest_seq, 200);
    assert.deepEqual(body.gaps, []);
    assert.deepEqual(body.messages.map((m) => m.seq), Array.from({ length: 200 }, (_, i) => i + 1));
    const bySeq = new Map(posted.map((p) => [p.seq, p.id]));
    for (const m of body.messages) assert.equal(m.id, bySeq.get(m.seq));
  }
});

test('a message posted to A for a user connected to B arrives on B as a msg with its data; B shows it in history and by id', { timeout: 60_000 }, async () => {
  const client = await connect(b, 'carol', 'phone');
  await expectFrame(client, 'welcome');
  const data = { text: 'from A to B 🌉', n: [1, 2, 3] };
  const sent = await post(a, 'carol', data);
  assert.ok(inBlock(sent.id, (await layoutOf(a)).partitionBase));
  const msg = await expectFrame(client, 'msg');
  assert.deepEqual({ seq: msg.seq, id: msg.id, data: msg.data }, { seq: 1, id: sent.id, data });
  client.ack(1);

  const history = await b.api.get('/v1/users/carol/messages');
  assert.equal(history.status, 200, history.text);
  const page = history.body as { gaps: unknown[]; messages: { seq: number; id: string; data: unknown }[] };
  assert.deepEqual(page.gaps, []);
  assert.deepEqual(page.messages.map((m) => ({ seq: m.seq, id: m.id, data: m.data })), [{ seq: 1, id: sent.id, data }]);

  const byId = await b.api.get(`/v1/messages/${sent.id}`);
  assert.equal(byId.status, 200, byId.text);
  const record = byId.body as { id: string; data: unknown; recipients: { user: string; seq: number }[] };
  assert.deepEqual({ id: record.id, data: record.data, seq: record.recipients[0]?.seq }, { id: sent.id, data, seq: 1 });
});

test('a client_msg_id stored on one node is answered as a duplicate on the other: one message, one inbox entry; other content under it is a 409', { timeout: 60_000 }, async () => {
  const { redis: probe } = await openInbox(cleanup, redis.url);
  await untilClaiming(a.api, probe, 'A');

  for (const [first, second, user] of [[a, b, 'cid-ann'], [b, a, 'cid-bob']] as const) {
    const body = { to: [user, `${user}-2`], type: 'test.cluster', data: { n: 1 }, client_msg_id: `order-${user}` };
    const stored = await first.api.post('/v1/messages', body);
    assert.equal(stored.status, 201, stored.text);
    const retried = await second.api.post('/v1/messages', body);
    assert.equal(retried.status, 200, retried.text);
    assert.deepEqual(retried.body, { ...(stored.body as object), duplicate: true }, 'the first message, its recipients and seqs');
    const batch = await second.api.post('/v1/messages/batch', { messages: [body] });
    assert.deepEqual((batch.body as { results: unknown[] }).results, [{ status: 200, ...(retried.body as object) }]);
    const changed = await second.api.post('/v1/messages', { ...body, data: { n: 2 } });
    expectError(changed, 409, 'CONFLICT', new RegExp(`order-${user}`));
    for (const node of [a, b]) {
      const page = await node.api.get(`/v1/users/${user}/messages`);
      const ids = (page.body as { messages: { id: string }[] }).messages.map((m) => m.id);
      assert.deepEqual(ids, [(stored.body as { id: string }).id], 'one inbox entry');
    }
  }

  // A room message retried on the other node after every member left: the first
  // message's answer (recipients 0), as on its own node, not a 404 for the empty room.
  const room = { room: 'cid-room', type: 'test.cluster', data: { n: 1 }, client_msg_id: 'cid-room-1' };
  const members = { body: { users: ['cid-dee'] } };
  assert.equal((await a.api.request('PUT', '/v1/rooms/cid-room/members', members)).status, 200);
  const sent = await a.api.post('/v1/messages', room);
  assert.equal(sent.status, 201, sent.text);
  assert.equal((await a.api.request('DELETE', '/v1/rooms/cid-room/members', members)).status, 200);
  const roomRetry = await b.api.post('/v1/messages', room);
  assert.equal(roomRetry.status, 200, roomRetry.text);
  assert.deepEqual(roomRetry.body, { id: (sent.body as { id: string }).id, room: 'cid-room', recipients: 0, duplicate: true });
  expectError(await b.api.post('/v1/messages', { ...room, client_msg_id: 'cid-room-2' }), 404, 'NOT_FOUND', /no room cid-room/);

  const keys = new Keys('px:');
  // Another store is writing it now (or crashed doing so, until the claim expires): 503, retry.
  await probe.set(keys.clientIdClaim('in-flight'), 'P|another-store', 'PX', 30_000);
  expectError(await b.api.post('/v1/messages', { to: 'cid-cy', type: 't', data: 1, client_msg_id: 'in-flight' }), 503, 'UNAVAILABLE',
    /client_msg_id "in-flight" is being stored by another node now, or was when that node stopped .*; retry$/);
  // A claim naming a message that is gone (expired): stored anew, and the claim is the new one's.
  const gone = encodeMsgId({ partition: (await layoutOf(a)).partitionBase, kind: MsgKind.user, counter: 999_999 });
  await probe.set(keys.clientIdClaim('gone-first'), gone);
  const anew = await b.api.post('/v1/messages', { to: 'cid-cy', type: 't', data: 2, client_msg_id: 'gone-first' });
  assert.equal(anew.status, 201, anew.text);
  assert.equal(await probe.get(keys.clientIdClaim('gone-first')), (anew.body as { id: string }).id);
});

test('a broadcast\'s client_msg_id used on one node is answered as a duplicate on the other: one stream entry; other data under it is a 409', { timeout: 60_000 }, async () => {
  const { redis: probe } = await openInbox(cleanup, redis.url);
  await untilClaiming(a.api, probe, 'A');
  for (const [first, second, key] of [[a, b, 'bcast-ab'], [b, a, 'bcast-ba']] as const) {
    const body = { type: 'test.cluster', data: { key }, client_msg_id: key };
    const published = await first.api.post('/v1/broadcast', body);
    assert.equal(published.status, 201, published.text);
    const retried = await second.api.post('/v1/broadcast', body);
    assert.equal(retried.status, 200, retried.text);
    assert.deepEqual(retried.body, { ...(published.body as object), duplicate: true }, 'the first broadcast, its id and bseq');
    expectError(await second.api.post('/v1/broadcast', { ...body, data: 2 }), 409, 'CONFLICT', new RegExp(key));
    const id = (published.body as { id: string }).id;
    const entries = (await probe.xrange('px:broadcast', '-', '+')).filter(([, f]) => f[f.indexOf('m') + 1] === id);
    assert.equal(entries.length, 1, 'one stream entry');
  }
});

test('while A is stopped its message is a 503 in B\'s history, not a gap, and B\'s metrics show the stalled delivery; once A is back on its data dir, history and devices get it', { timeout: 120_000 }, async () => {
  const before = await layoutOf(a);
  const fromA = await post(a, 'erin', { text: 'stored on A' });
  const fromB = await post(b, 'erin', { text: 'stored on B' });
  await post(a, 'gail', { text: 'stored on A' });
  assert.deepEqual([fromA.seq, fromB.seq], [1, 2]);
  assert.deepEqual(await a.serve.term(), { code: 0, signal: null });

  // B's words depend on whether it has read A's lease gone yet (A gives it up as it
  // stops): before, its fetch from A fails; after, the partition's owner has no lease.
  const refused = await b.api.get('/v1/users/erin/messages');
  expectError(refused, 503, 'UNAVAILABLE', /^the node holding message store \S+ cannot be read now; retry later$|^message partition \d+ is held by store \S+, whose lease has lapsed \(/);
  assert.equal(refused.headers.get('retry-after'), '1');
  // A page after A's message is B's own, and reads fine.
  const rest = await b.api.get('/v1/users/erin/messages?after_seq=1');
  assert.equal(rest.status, 200, rest.text);
  assert.deepEqual((rest.body as { messages: { id: string }[] }).messages.map((m) => m.id), [fromB.id]);
  expectError(await b.api.get(`/v1/messages/${fromA.id}`), 503, 'UNAVAILABLE');

  // A device connecting meanwhile waits: it is not told gap, nor skipped past seq 1.
  const healthy = await stallMetrics(b);
  assert.equal(healthy.stalled, 0);
  const waiting = await connect(b, 'erin', 'tablet');
  // B's operator sees it: a failed read of records, and each user waiting on them (an
  // ops newcomer's finding). A user whose connections all close leaves the gauge.
  const leaving = await connect(b, 'gail', 'phone');
  await stalledUsers(b, 2);
  assert.ok((await stallMetrics(b)).recordFailures > healthy.recordFailures);
  await leaving.close();
  await stalledUsers(b, 1);

  a = { ...a, ...(await start(a.dataDir, a.token)) };
  assert.deepEqual(await layoutOf(a), before, 'the same store id and block after a restart');
  const after = await post(a, 'frank', { text: 'minted after the restart' });
  assert.ok(inBlock(after.id, before.partitionBase), after.id);

  const welcome = await expectFrame(waiting, 'welcome');
  assert.equal(welcome.resume_from, 1);
  const first = await expectFrame(waiting, 'msg');
  assert.deepEqual({ seq: first.seq, id: first.id, data: first.data }, { seq: 1, id: fromA.id, data: { text: 'stored on A' } });
  assert.equal((await expectFrame(waiting, 'msg')).id, fromB.id);
  await stalledUsers(b, 0);

  const history = await b.api.get('/v1/users/erin/messages');
  assert.equal(history.status, 200, history.text);
  const page = history.body as { gaps: unknown[]; messages: { id: string }[] };
  assert.deepEqual(page.gaps, []);
  assert.deepEqual(page.messages.map((m) => m.id), [fromA.id, fromB.id]);

  const again = await connect(b, 'erin', 'phone');
  await expectFrame(again, 'welcome');
  assert.deepEqual([(await expectFrame(again, 'msg')).id, (await expectFrame(again, 'msg')).id], [fromA.id, fromB.id]);
});

test('a data dir claiming a block another store holds is refused at start, naming the dir, the partitions and the owner', { timeout: 60_000 }, async () => {
  const owner = await layoutOf(b);
  const forged = await tempDataDir(cleanup, 'pixiu-node-c-');
  await mkdir(path.join(forged, 'xiu'), { recursive: true });
  await writeFile(path.join(forged, 'xiu', 'LAYOUT'), `${JSON.stringify({
    format: 1, partitions: P, hash: 'fnv1a-32-utf16', storeId: 'forged-store', partitionBase: owner.partitionBase,
  })}\n`);
  const run = await runCli(['serve'], envOf({ dataDir: forged, token: 'node-c-api-token-0123456789' }));
  assert.equal(run.code, 1, run.stderr);
  const line = run.stderr.trim().split('\n').find((l) => l.startsWith('pixiu: ')) ?? run.stderr;
  assert.ok(line.includes(`the store in ${path.join(forged, 'xiu')} cannot claim partitions ${owner.partitionBase}..${owner.partitionBase + P - 1}`), line);
  assert.ok(line.includes(`held by store ${owner.storeId}`), line);
  assert.ok(line.includes(path.join(b.dataDir, 'xiu')), `names where the owner lives: ${line}`);
  // Nothing of B's was taken: B still mints in its block and A reads it.
  const sent = await post(b, 'gina', { ok: true });
  assert.ok(inBlock(sent.id, owner.partitionBase));
  const read = await a.api.get(`/v1/messages/${sent.id}`);
  assert.equal(read.status, 200, read.text);
});

test('an older copy of A\'s data dir, started after its copy ran on and minted more, mints none of the copy\'s ids: it moves past them and logs an error', { timeout: 120_000 }, async () => {
  const before = await post(a, 'ivy', { n: 0 });
  assert.deepEqual(await a.serve.term(), { code: 0, signal: null });
  // A copy of the stopped data dir runs (moved elsewhere), mints more, and stops.
  const copyDir = await tempDataDir(cleanup, 'pixiu-node-a-copy-');
  await cp(a.dataDir, copyDir, { recursive: true });
  const copy = await start(copyDir, a.token);
  const minted: string[] = [];
  for (let n = 1; n <= 3; n++) minted.push((await post(copy, 'ivy', { n })).id);
  assert.deepEqual(await copy.serve.term(), { code: 0, signal: null });
  // The older original starts again: its store is behind what the store minted.
  a = { ...a, ...(await start(a.dataDir, a.token)) };
  const after = await post(a, 'ivy', { n: 4 });
  assert.ok(![before.id, ...minted].includes(after.id), `${after.id} minted twice`);
  assert.ok(decodeMsgId(after.id).counter > decodeMsgId(minted[2] ?? '').counter, `${after.id} after ${minted.join(', ')}`);
  const behind = a.serve.stdout().split('\n').filter((l) => l.includes('this data dir is behind the message ids'));
  assert.equal(behind.length, 1, a.serve.stdout().slice(-4000));
  assert.equal((JSON.parse(behind[0] ?? '{}') as { level?: number }).level, 50);
});
