/**
 * The store lease fences writes by time (src/store/write-fence.ts,
 * src/cluster/store-ownership.ts; DESIGN.md §9: one store, one running node), against
 * a private redis-server:
 *
 * - At the store's level, on an injected monotonic clock: once {@link LEASE_FENCE_MS}
 *   have passed since the last renewal that confirmed the lease, a put is refused
 *   UNAVAILABLE, a put already queued is neither written nor answered, and one whose
 *   batch was being written when the deadline passed is written but answered
 *   UNAVAILABLE; a renewal that finds the lease still this node's takes puts again; one
 *   that finds it lapsed moves the counters past what another node recorded meanwhile
 *   — also when that move failed once (the next renewal finds its own lease), and when
 *   the renewal that found the lapse was not late (paused between its start and its
 *   lease write).
 * - On real timers: one renewal that fails (Redis timing out once) refuses no put on an
 *   otherwise healthy node: it is tried again well before the deadline.
 * - Two real `pixiu serve` processes: A is paused (SIGSTOP) past its lease, B starts on
 *   a copy of A's data dir and takes the store, POSTs reach A while it is stopped, and
 *   A is continued (SIGCONT): not one of them is answered 201, and B's history shows no
 *   gap for them (the reviewer's reproduction: four of six were 201, read as `expired`
 *   gaps on B).
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { isPixiuError } from '../../src/errors.js';
import { MsgKind } from '../../src/ids/msg-id.js';
import { Keys } from '../../src/redis/keys.js';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { LEASE_FENCE_MS, LEASE_RENEW_MS } from '../../src/cluster/lease-watch.js';
import { RESUME_MARGIN, StoreOwnership } from '../../src/cluster/store-ownership.js';
import { MessageStore, type NewMessage } from '../../src/store/message-store.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, PixiuClient, spawnServe, tempDataDir, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';

const files = cleanupList();
let server: RedisServer;
let redis: Redis;

before(async () => {
  server = await RedisServer.start();
  files.after(() => server.destroy());
  ({ redis } = await openInbox(files, server.url));
});

after(() => files.run());

const FENCED = /^message store writes are suspended: this node's store lease has not been confirmed in time/;
const fenced = (err: unknown): boolean => isPixiuError(err, 'UNAVAILABLE') && FENCED.test(err.message);
/** A message to user u1, for the store, and as a POST's body. */
const msg = (n: number): NewMessage => ({ kind: MsgKind.user, to: ['u1'], type: 't', data: { n } });
const body = (n: number): { to: string; type: string; data: unknown } => ({ to: 'u1', type: 't', data: { n } });

/** Fault injection on the claims' Redis calls: a test sets a hook, run (once) before the next call. */
type Hooked = PartitionClaims & { before: Partial<Record<'storeIds' | 'renewLease', () => Promise<void>>> };

/** `claims` whose storeIds and renewLease run `before[name]` once, when set, before calling Redis. */
function hooked(claims: PartitionClaims): Hooked {
  const h = Object.assign(claims, { before: {} }) as Hooked;
  for (const name of ['storeIds', 'renewLease'] as const) {
    const real = claims[name].bind(claims) as (...a: unknown[]) => Promise<unknown>;
    (h as unknown as Record<string, unknown>)[name] = async (...a: unknown[]): Promise<unknown> => {
      const hook = h.before[name];
      h.before[name] = undefined;
      await hook?.();
      return real(...a);
    };
  }
  return h;
}

/**
 * A store of one partition under `prefix`, its ownership advertised, both on
 * `monotonic` (real time when undefined); closed when `t` ends.
 */
async function fencedStore(t: TestContext, prefix: string, monotonic?: () => number) {
  const keys = new Keys(prefix);
  const claims = hooked(new PartitionClaims(redis, keys));
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-fence-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const dir = path.join(root, 'xiu');
  const { logger, lines } = capturingLogger();
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 1, logger, ...(monotonic === undefined ? {} : { monotonic }) });
  const store = await MessageStore.open({
    dir, partitions: 1, partitionBase: ownership.partitionBase, layout: ownership.layout, sync: false, cacheBytes: 0,
    defaultTtlMs: 60_000, maxMessageBytes: 65_536, sweepIntervalMs: 3_600_000, ...(monotonic === undefined ? {} : { monotonic }),
  });
  // The ownership stops before its store closes, as the service does: `t.after` runs in
  // order, and with the store's close first, a renewal could run on a closed store.
  t.after(async () => {
    await ownership.stop();
    await store.close();
  });
  await ownership.advertise({ url: 'http://127.0.0.1:18601', node: 'node-f' }, (reason) => store.suspendWrites(reason), store);
  return { keys, claims, ownership, store, lines };
}

/** Renews until a renewal has let `store` take writes again (a renewal in flight is let finish: renewNow does nothing meanwhile). */
async function renewUntilWritable(ownership: StoreOwnership, store: MessageStore, what: string): Promise<void> {
  await waitUntil(what, () => {
    ownership.renewNow();
    return Promise.resolve(store.writeProblem === undefined);
  }, 5000, 10);
}

test('past the lease\'s deadline a put is refused and a queued batch is not answered as stored; a renewal that confirms the lease takes puts again', async (t) => {
  let clock = 1_000_000;
  const { keys, claims, ownership, store, lines } = await fencedStore(t, 'fence1:', () => clock);
  await store.put(msg(1));

  // Just before the deadline: taken. At it: refused, and /readyz says why.
  clock += LEASE_FENCE_MS - 1;
  await store.put(msg(2));
  clock += 1;
  await assert.rejects(store.put(msg(3)), fenced);
  // The whole store's, as /readyz says it.
  assert.match(store.writeProblem ?? '', new RegExp(`^the message store takes no messages now: ${FENCED.source.slice(1)}`));

  // A put taken before the deadline whose batch is built after it: nothing written.
  clock -= 1;
  const written = store.counters[0];
  const queued = store.put(msg(4));
  clock += 1;
  await assert.rejects(queued, fenced);
  assert.equal(store.counters[0], written, 'no id taken, nothing written');

  // A batch being written when the deadline passes: written, answered UNAVAILABLE all the same.
  clock -= 1;
  const inFlight = store.put(msg(5));
  // The batch is built and handed to LevelDB in the group commit's turn (group-commit.ts), before this one.
  setImmediate(() => { clock += 1; });
  await assert.rejects(inFlight, fenced);
  assert.equal(store.counters[0], (written ?? 0) + 1, 'written before the check');

  // A renewal that finds the lease still this node's: puts again.
  ownership.renewNow();
  await waitUntil('writes resumed', () => Promise.resolve(store.writeProblem === undefined), 5000, 10);
  await store.put(msg(6));
  assert.ok(lines.some((l) => l.level === 40 && l.msg === 'store lease confirmed again after its writes\' deadline passed: writes resumed' && l.lapsed === false),
    JSON.stringify(lines.slice(-5)));

  // Past the deadline again, the lease lapsed, and another node served the store meanwhile
  // (a copy of the data dir), recording its counters: they are moved past before a put.
  clock += LEASE_FENCE_MS;
  await assert.rejects(store.put(msg(7)), fenced);
  await redis.del(keys.storeLease(ownership.storeId));
  const theirs = (store.assignedCounters[0] ?? 0) + 1000;
  await claims.recordMinted(ownership.storeId, ownership.partitionBase, [theirs]);
  ownership.renewNow();
  await waitUntil('writes resumed after the lapse', () => Promise.resolve(store.writeProblem === undefined), 5000, 10);
  assert.equal(store.assignedCounters[0], theirs + RESUME_MARGIN);
  assert.ok(lines.some((l) => l.level === 50 && /^this node's store lease lapsed while it was not renewed, and another node served/.test(l.msg ?? '')),
    JSON.stringify(lines.slice(-5)));
  await store.put(msg(8));
});

test('a lapse is not forgotten when the move past the recorded counters fails: the next renewal, finding its own lease, moves them before writes resume', async (t) => {
  let clock = 1_000_000;
  const { keys, claims, ownership, store, lines } = await fencedStore(t, 'fence3:', () => clock);
  await store.put(msg(1));
  // Late, the lease lapsed, a copy served the store and recorded its counters.
  clock += LEASE_FENCE_MS + 20_000;
  await redis.del(keys.storeLease(ownership.storeId));
  const theirs = (store.assignedCounters[0] ?? 0) + 1000;
  await claims.recordMinted(ownership.storeId, ownership.partitionBase, [theirs]);
  // This renewal writes the lease, then the move fails (Redis times out reading the records).
  claims.before.storeIds = () => Promise.reject(new Error('injected: Redis timed out'));
  ownership.renewNow();
  await waitUntil('the renewal failed', () => Promise.resolve(lines.some((l) => l.msg === 'store lease renewal failed')), 5000, 10);
  await assert.rejects(store.put(msg(2)), fenced);
  // The next renewal finds this node's own lease: the counters move all the same, first.
  await renewUntilWritable(ownership, store, 'writes resumed');
  assert.equal(store.assignedCounters[0], theirs + RESUME_MARGIN, 'moved past the copy\'s counters before writes resumed');
  await store.put(msg(3));
});

test('a renewal paused between its start and its lease write, while a copy served the store and left, moves the counters before writes resume', async (t) => {
  let clock = 1_000_000;
  const { keys, claims, ownership, store } = await fencedStore(t, 'fence4:', () => clock);
  await store.put(msg(1));
  const theirs = (store.assignedCounters[0] ?? 0) + 1000;
  // The renewal has read its start; the process pauses 30 s before its lease write reaches
  // Redis. Meanwhile the lease lapsed, a copy served the store (recording its counters) and left.
  let paused!: () => void;
  const pause = new Promise<void>((resolve) => { paused = resolve; });
  claims.before.renewLease = async () => {
    clock += 30_000;
    await redis.del(keys.storeLease(ownership.storeId));
    await claims.recordMinted(ownership.storeId, ownership.partitionBase, [theirs]);
    paused();
  };
  ownership.renewNow();
  await pause;
  // That renewal is not late (it began before the pause) and finds no lease; the next is late and finds its own.
  await renewUntilWritable(ownership, store, 'writes resumed');
  assert.equal(store.assignedCounters[0], theirs + RESUME_MARGIN, 'moved past the copy\'s counters before writes resumed');
  await store.put(msg(2));
});

test('one failed renewal refuses no put on an otherwise healthy node: it is tried again well before the deadline', { timeout: 60_000 }, async (t) => {
  const { claims, store, lines } = await fencedStore(t, 'fence5:');
  // Real timers and clock. When each lease write begins; the second from now fails once (Redis slow for a moment).
  const starts: number[] = [];
  const onWrite = (): Promise<void> => {
    starts.push(performance.now());
    claims.before.renewLease = onWrite;
    return starts.length === 2 ? Promise.reject(new Error('injected: Redis timed out once')) : Promise.resolve();
  };
  claims.before.renewLease = onWrite;
  await waitUntil('a regular renewal', () => Promise.resolve(starts.length > 0), LEASE_RENEW_MS + 2000, 10);
  // Puts until past the deadline that renewal set, and the renewal due after it.
  const until = (starts[0] ?? 0) + LEASE_FENCE_MS + 1000;
  let refused = 0;
  let taken = 0;
  while (performance.now() < until) {
    await store.put(msg(taken)).then(() => { taken += 1; }, (err: unknown) => { if (fenced(err)) refused += 1; else throw err; });
    await delay(5);
  }
  assert.equal(refused, 0, `${refused} puts refused (${taken} taken)`);
  assert.ok(lines.some((l) => l.msg === 'store lease renewal failed'), 'the renewal failed');
  assert.ok(!lines.some((l) => l.msg === 'store lease confirmed again after its writes\' deadline passed: writes resumed'), JSON.stringify(lines.filter((l) => l.level >= 40)));
  // The failed one (starts[1]) was tried again within a second or so, not a renewal period later.
  assert.ok(starts.length >= 3 && (starts[2] ?? Infinity) - (starts[1] ?? 0) < LEASE_RENEW_MS / 2, `lease writes began at ${starts.map((s) => (s - (starts[0] ?? 0)).toFixed(0)).join(', ')} ms`);
});

/** POSTs one message to `url` and resolves once the request is handed to the kernel (`sent`) and once answered (`answer`). */
function postRaw(url: string, token: string, n: number): { sent: Promise<void>; answer: Promise<{ status: number; retryAfter?: string; body: string }> } {
  const text = JSON.stringify(body(n));
  const req = http.request(new URL('/v1/messages', url), {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
  });
  const sent = new Promise<void>((resolve, reject) => { req.on('finish', resolve); req.on('error', reject); });
  const answer = new Promise<{ status: number; retryAfter?: string; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => { text += c.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ...(res.headers['retry-after'] === undefined ? {} : { retryAfter: String(res.headers['retry-after']) }), body: text }));
    });
    req.on('error', reject);
  });
  req.end(text);
  return { sent, answer };
}

test('a node paused past its lease while another node took its store answers no 201 once continued', { timeout: 120_000 }, async (t) => {
  const token = 'fence-api-token-0123456789';
  const env = (dataDir: string): Record<string, string> => ({
    PIXIU_REDIS_URL: server.url, PIXIU_REDIS_PREFIX: 'fence2:', PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_API_TOKEN: token,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed',
  });
  const dirA = await tempDataDir(t, 'pixiu-fence-a-');
  const dirB = await tempDataDir(t, 'pixiu-fence-b-');
  let a: ServeProcess = await spawnServe(env(dirA), t);
  assert.equal((await new PixiuClient(a.url, token).post('/v1/messages', body(0))).status, 201);
  // A copy of A's data dir, taken while A is stopped: the same store.
  assert.deepEqual(await a.term(), { code: 0, signal: null });
  await cp(dirA, dirB, { recursive: true });
  a = await spawnServe(env(dirA), t);
  // Serving (to another user: this message is not in the copy, and reads as a gap on B).
  assert.equal((await new PixiuClient(a.url, token).post('/v1/messages', { ...body(1), to: 'u0' })).status, 201);

  a.proc.kill('SIGSTOP');
  t.after(() => { if (a.proc.exitCode === null && a.proc.signalCode === null) a.proc.kill('SIGCONT'); });
  // B waits out A's lease (A's pid is alive: watched until the lease lapses), then serves the store.
  const b = await spawnServe(env(dirB), t);
  const apiB = new PixiuClient(b.url, token);
  assert.equal((await apiB.post('/v1/messages', body(2))).status, 201);
  // POSTs to A while it is stopped: in its socket's queue when it runs again.
  const posts = Array.from({ length: 8 }, (_, i) => postRaw(a.url, token, 10 + i));
  await Promise.all(posts.map((p) => p.sent));
  a.proc.kill('SIGCONT');
  const answers = await Promise.all(posts.map((p) => p.answer));
  assert.deepEqual(answers.filter((r) => r.status === 201), [], 'none stored by A after its lease could have lapsed');
  for (const r of answers) {
    assert.equal(r.status, 503, r.body);
    assert.equal(r.retryAfter, '1');
  }
  // B, serving the store, shows no gap: nothing was acknowledged that it does not hold.
  const history = await apiB.get('/v1/users/u1/messages');
  assert.equal(history.status, 200, history.text);
  assert.deepEqual((history.body as { gaps: unknown[] }).gaps, []);
});
