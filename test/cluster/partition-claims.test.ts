/**
 * Store partition claims (DESIGN.md §2, §9; src/cluster/partition-claims.ts and
 * lua/partition-claim-3.lua) against a private redis-server, each test under its own
 * key prefix; the claim's life in a data dir (src/cluster/store-ownership.ts,
 * src/store/layout.ts); and the pure helpers.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, readlinkSync } from 'node:fs';
import { copyFile, cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { StartupError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import {
  PartitionClaims, claimRefusal, parseClaimReply, partitionSpan, type ClaimAnswer, type StoreDescription,
} from '../../src/cluster/partition-claims.js';
import { LEASE_TTL_MS, RESUME_MARGIN, StoreOwnership, awaitLeaseFree } from '../../src/cluster/store-ownership.js';
import { defaultAdvertiseUrl } from '../../src/cluster/advertise-check.js';
import { listeningNodes } from '../../src/cluster/bus.js';
import { MessageStore } from '../../src/store/message-store.js';
import { checkLayout, pinPartitionBase, type IdentifiedLayout } from '../../src/store/layout.js';
import { MsgKind, decodeMsgId } from '../../src/ids/msg-id.js';
import type { CleanupContext } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { capturingLogger } from '../harness/log-capture.js';
import { decoded, flushPrefix, waitUntil } from '../harness/checks.js';

let server: RedisServer;
let redis: Redis;
let nextPrefix = 0;
const logger = createLogger('silent');
const HERE: StoreDescription = { dir: '/data/a/xiu', host: 'host-a' };

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
});

after(async () => {
  await redis?.quit();
  await server?.destroy();
});

/** Claims on a key prefix no other test uses. */
function freshClaims(): { claims: PartitionClaims; keys: Keys } {
  const keys = new Keys(`c${nextPrefix++}:`);
  return { claims: new PartitionClaims(redis, keys), keys };
}

/** A temp store folder, removed when the test ends. */
async function storeDir(t: CleanupContext): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-claims-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  return path.join(root, 'xiu');
}

function held(answer: ClaimAnswer): number {
  assert.equal(answer.kind, 'held', JSON.stringify(answer));
  return (answer as { base: number }).base;
}

test('first claims take the lowest free aligned block; a store asking again gets the block it holds', async () => {
  const { claims, keys } = freshClaims();
  assert.equal(held(await claims.claim('s1', 8, undefined, HERE)), 0);
  assert.equal(held(await claims.claim('s2', 8, undefined, HERE)), 8);
  // A lost answer retried: the same block, nothing new taken.
  assert.equal(held(await claims.claim('s2', 8, undefined, HERE)), 8);
  // Another size lands on its own alignment, after what is held.
  assert.equal(held(await claims.claim('s3', 16, undefined, HERE)), 16);
  assert.equal(held(await claims.claim('s4', 4, undefined, HERE)), 32);
  const owners = await redis.hgetall(keys.storePartitions());
  assert.equal(Object.keys(owners).length, 8 + 8 + 16 + 4);
  assert.equal(owners['0'], 's1');
  assert.equal(owners['15'], 's2');
  assert.equal(owners['31'], 's3');
  assert.equal(owners['35'], 's4');
  assert.deepEqual(JSON.parse(await redis.hget(keys.storeDescriptions(), 's3') ?? ''), HERE);
  // Aligned to its own size: a block of 8 after one of 4 starts at 8, not at 4.
  const other = freshClaims();
  assert.equal(held(await other.claims.claim('q4', 4, undefined, HERE)), 0);
  assert.equal(held(await other.claims.claim('q8', 8, undefined, HERE)), 8);
});

test('a re-assertion writes the block back after the claims were lost; a held block is a conflict naming its owner', async () => {
  const { claims, keys } = freshClaims();
  assert.equal(held(await claims.claim('old', 8, 0, HERE)), 0);
  await redis.del(keys.storePartitions(), keys.storeDescriptions());
  assert.equal(await claims.ownerOf(3), null);
  assert.equal(held(await claims.claim('old', 8, 0, HERE)), 0);
  assert.equal(await claims.ownerOf(3), 'old');

  const answer = await claims.claim('intruder', 8, 0, { dir: '/data/b/xiu', host: 'host-b' });
  assert.deepEqual(answer, { kind: 'conflict', partition: 0, owner: 'old', description: HERE });
  // Overlapping only in part is a conflict too, and writes nothing.
  assert.deepEqual(await claims.claim('intruder', 4, 6, HERE), { kind: 'conflict', partition: 6, owner: 'old', description: HERE });
  assert.equal(await claims.ownerOf(9), null);
  assert.equal(await redis.hget(keys.storePartitions(), '7'), 'old');
  // The conflict names the first partition held by another store, not the block's base.
  assert.equal(held(await claims.claim('later', 4, 12, HERE)), 12);
  assert.deepEqual(await claims.claim('intruder', 8, 8, HERE), { kind: 'conflict', partition: 12, owner: 'later', description: HERE });
});

test('a claim answers whether this Redis knew the store before: not on its first claim, yes on every later one, not again once Redis lost the claims', async () => {
  const { claims, keys } = freshClaims();
  const known = async (base: number | undefined): Promise<boolean> => {
    const answer = await claims.claim('s', 8, base, HERE);
    assert.equal(answer.kind, 'held', JSON.stringify(answer));
    return (answer as { known: boolean }).known;
  };
  assert.equal(await known(undefined), false, 'a first claim');
  assert.equal(await known(undefined), true, 'a first claim whose answer was lost, asked again');
  assert.equal(await known(0), true, 're-asserted by its base');
  await redis.del(keys.storePartitions(), keys.storeDescriptions());
  assert.equal(await known(0), false, 'the same data dir after Redis lost its data');
  assert.equal(await known(0), true);
});

test('a data dir with stored messages started on a Redis (or key prefix) that does not know its store is logged at error naming what is lost; one that stored nothing, a new one and a known one are not; a renewal that finds the store forgotten logs that Redis lost its data', async (t) => {
  const before = freshClaims();
  const dir = await storeDir(t);
  const first = await StoreOwnership.claim({ claims: before.claims, dir, partitions: 4, logger });
  const errors = (lines: { level: number; msg?: string }[]): string[] => lines.filter((l) => l.level === 50).map((l) => l.msg ?? '');
  // A new data dir: nothing to say.
  const fresh = capturingLogger();
  const unused = { counters: [0, 0, 0, 0], assignedCounters: [0, 0, 0, 0], advanceCounters: () => Promise.resolve() };
  const stored = { counters: [0, 3, 0, 0], assignedCounters: [0, 3, 0, 0], advanceCounters: () => Promise.resolve(), writeUntil: () => undefined, leaseRenewalFailed: () => undefined };
  assert.equal(await first.checkKnown(stored), false);
  // Known to this Redis: nothing either.
  const same = await StoreOwnership.claim({ claims: before.claims, dir, partitions: 4, logger: fresh.logger, redisName: 'redis://a, key prefix "x:"' });
  assert.equal(await same.checkKnown(stored), false);
  assert.deepEqual(errors(fresh.lines), []);
  // Another key prefix (or Redis) for the same data dir: its block is pinned, the store unknown.
  const other = freshClaims();
  const moved = capturingLogger();
  const elsewhere = await StoreOwnership.claim({ claims: other.claims, dir, partitions: 4, logger: moved.logger, redisName: 'redis://b, key prefix "y:"' });
  assert.equal(elsewhere.partitionBase, first.partitionBase);
  assert.equal(await elsewhere.checkKnown(unused), false, 'a data dir that stored nothing loses nothing');
  assert.equal(await elsewhere.checkKnown(stored, () => Promise.resolve('a hint')), true);
  const line = moved.lines.find((l) => l.level === 50);
  assert.ok(line !== undefined, JSON.stringify(moved.lines));
  assert.match(line.msg ?? '', /^this Redis does not know this data dir's store, which has stored messages: Redis lost its data while this node was stopped, or it is another Redis or key prefix/);
  assert.match(line.msg ?? '', /a device resuming with last_seq is sent a reset/);
  assert.deepEqual([line.store, line.dir, line.redis, line.hint], [first.storeId, dir, 'redis://b, key prefix "y:"', 'a hint']);

  // Running: a renewal that finds the store's description gone (a FLUSHALL) says Redis lost its data.
  const running = capturingLogger();
  const node = await StoreOwnership.claim({ claims: other.claims, dir, partitions: 4, logger: running.logger });
  await node.advertise({ url: 'http://127.0.0.1:18022', node: 'n1' }, () => undefined, stored);
  t.after(() => node.stop());
  assert.deepEqual(errors(running.lines), [], 'known at start: no error');
  await redis.del(other.keys.storePartitions(), other.keys.storeDescriptions());
  node.renewNow();
  await waitUntil('the renewal logged the loss', () => Promise.resolve(errors(running.lines).length > 0), 5000, 20);
  assert.match(errors(running.lines)[0] ?? '', /^Redis lost its data while this node ran \(this store's claim was gone: a FLUSHALL, a Redis that came back empty, or a snapshot older than this store\); .*connected devices are sent a reset$/);
  node.renewNow();
  await waitUntil('written back', async () => (await redis.hlen(other.keys.storeDescriptions())) === 1, 5000, 20);
});

test('when every block is held, a new store is told so; a store whose holdings are not one block is refused', async () => {
  const { claims } = freshClaims();
  assert.equal(held(await claims.claim('big', 128, undefined, HERE)), 0);
  assert.equal(held(await claims.claim('big2', 128, undefined, HERE)), 128);
  assert.deepEqual(await claims.claim('late', 1, undefined, HERE), { kind: 'full' });
  const fresh = freshClaims();
  await redis.hset(fresh.keys.storePartitions(), '0', 'split', '2', 'split');
  await assert.rejects(fresh.claims.claim('split', 2, undefined, HERE), /not one block of 2/);
  // A store holding one whole block of 8 that asks for 4 is refused too (it would keep all 8).
  await redis.hset(fresh.keys.storePartitions(), ...Array.from({ length: 8 }, (_, i) => [String(16 + i), 'wide']).flat());
  await assert.rejects(fresh.claims.claim('wide', 4, undefined, HERE), /not one block of 4/);
});

test('a store pinned to the last block re-asserts it by its base (base + count = 256); one reaching past partition 255 is refused', async () => {
  const { claims } = freshClaims();
  assert.equal(held(await claims.claim('low', 8, undefined, HERE)), 0);
  // The block ending at partition 255, as a restarted store asks for it (LAYOUT pins
  // its base), and again after the claims were lost.
  assert.equal(held(await claims.claim('top', 8, 248, HERE)), 248);
  assert.equal(held(await claims.claim('top', 8, 248, HERE)), 248);
  assert.equal(held(await freshClaims().claims.claim('whole', 256, 0, HERE)), 0, 'the whole space, on a prefix of its own');
  await assert.rejects(claims.claim('past', 8, 249, HERE), /base \+ count <= 256/);
  await assert.rejects(claims.claim('past', 16, 248, HERE), /base \+ count <= 256/);
});

test('leases are written with a TTL, read back, and dropped', async () => {
  const { claims, keys } = freshClaims();
  assert.equal(await claims.leaseOf('s1'), undefined);
  await claims.renewLease('s1', { url: 'http://127.0.0.1:1234', node: 'n1' }, 15_000);
  assert.deepEqual(await claims.leaseOf('s1'), { url: 'http://127.0.0.1:1234', node: 'n1' });
  const ttl = await redis.pttl(keys.storeLease('s1'));
  assert.ok(ttl > 10_000 && ttl <= 15_000, String(ttl));
  await claims.releaseLease('s1');
  assert.equal(await claims.leaseOf('s1'), undefined);

  // A node drops only its own lease: another node's, written in its place, stays.
  const mine = { url: 'http://127.0.0.1:1234', node: 'n1', host: 'h', pid: 7 };
  const theirs = { url: 'http://127.0.0.1:5678', node: 'n2', host: 'h', pid: 8 };
  assert.equal(await claims.renewLease('s2', mine, 15_000), undefined);
  assert.deepEqual(await claims.renewLease('s2', theirs, 15_000), mine, 'SET … GET answers the lease it replaced');
  await claims.releaseLease('s2', mine);
  assert.deepEqual(await claims.leaseOf('s2'), theirs);
  await claims.releaseLease('s2', theirs);
  assert.equal(await claims.leaseOf('s2'), undefined);
});

test('a new data dir claims a block and pins it in LAYOUT; restarted, it keeps it; its store mints ids of its block', async (t) => {
  const { claims } = freshClaims();
  await claims.claim('someone-else', 8, 0, HERE);
  const dir = await storeDir(t);
  const first = await StoreOwnership.claim({ claims, dir, partitions: 8, logger });
  assert.equal(first.partitionBase, 8);
  assert.match(first.storeId, /^[0-9a-f]{16}$/);
  const layout = JSON.parse(await readFile(path.join(dir, 'LAYOUT'), 'utf8')) as Record<string, unknown>;
  assert.deepEqual({ storeId: layout.storeId, partitionBase: layout.partitionBase }, { storeId: first.storeId, partitionBase: 8 });

  await claims.claim('third', 8, undefined, HERE);
  const again = await StoreOwnership.claim({ claims, dir, partitions: 8, logger });
  assert.deepEqual([again.storeId, again.partitionBase], [first.storeId, 8]);

  const store = await MessageStore.open({
    dir, partitions: 8, partitionBase: 8, sync: false, cacheBytes: 0, defaultTtlMs: 60_000, maxMessageBytes: 65_536, sweepIntervalMs: 60_000,
  });
  t.after(() => store.close());
  const puts = await Promise.all(Array.from({ length: 32 }, (_, i) => store.put({ kind: MsgKind.user, type: 't', data: i, to: [`u${i}`] })));
  for (const p of puts) {
    const { partition } = decodeMsgId(p.id);
    assert.ok(partition >= 8 && partition < 16, p.id);
    assert.ok(store.hasPartition(partition));
  }
  assert.deepEqual((await store.getMany(puts.map((p) => p.id))).map((r) => decoded(r)?.data), puts.map((_, i) => i));
  // Opening the folder at another base is refused: its ids would change meaning.
  await assert.rejects(checkLayout(dir, 8, 0), /mints partitions 8\.\.15, not 0\.\.7/);
  // Nor does a pinned base move: pinning another is refused and the file keeps its base
  // (a claim with the pinned base always answers that base; this is layout.ts's own guard).
  await assert.rejects(pinPartitionBase(dir, layout as unknown as IdentifiedLayout, 0),
    (err: unknown) => err instanceof StartupError && /has partition base 8; it cannot move to 0/.test(err.message));
  assert.equal((JSON.parse(await readFile(path.join(dir, 'LAYOUT'), 'utf8')) as { partitionBase: number }).partitionBase, 8);
});

test('a data dir whose block is held by another store is refused at start, naming the dir, the partitions and the owner', async (t) => {
  const { claims, keys } = freshClaims();
  const dir = await storeDir(t);
  const mine = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  // Forge: the claims are lost and another store takes the block first.
  await redis.del(keys.storePartitions());
  await claims.claim('other-store', 4, undefined, { dir: '/srv/other/xiu', host: 'box-2' });
  await assert.rejects(StoreOwnership.claim({ claims, dir, partitions: 4, logger }), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(err.message, new RegExp(`the store in ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} cannot claim partitions 0\\.\\.3`));
    assert.match(err.message, /held by store other-store \(store folder \/srv\/other\/xiu on host box-2\)/);
    return true;
  });
  assert.equal(mine.partitionBase, 0);
});

test('a node does not start on a store another live node serves (a copied data dir); a lease a dead process left does not stop it', async (t) => {
  const { claims } = freshClaims();
  const dir = await storeDir(t);
  const original = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  await original.advertise({ url: 'http://127.0.0.1:18001', node: 'node-a' }, () => undefined);
  t.after(() => original.stop());
  // A copy of the data dir: the same LAYOUT, so the same store id and block.
  const copy = await storeDir(t);
  await mkdir(copy, { recursive: true });
  await copyFile(path.join(dir, 'LAYOUT'), path.join(copy, 'LAYOUT'));
  await assert.rejects(StoreOwnership.claim({ claims, dir: copy, partitions: 4, logger }), (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, new RegExp(`\\(store ${original.storeId}\\) is already served by node node-a at http://127\\.0\\.0\\.1:18001 \\(host ${os.hostname()}, pid ${process.pid}\\)`));
    assert.match(err.message, /another node serves this data dir's store \(this folder started twice, or a copy of it\)/);
    return true;
  });
  // Once the original has stopped, the copy may serve the store (it was moved).
  await original.stop();
  const moved = await StoreOwnership.claim({ claims, dir: copy, partitions: 4, logger });
  assert.equal(moved.storeId, original.storeId);

  // A lease a crashed process of this machine left: taken at once.
  const dead = spawnSync(process.execPath, ['-e', '']).pid;
  const pidns = readlinkSync('/proc/self/ns/pid');
  await claims.renewLease(moved.storeId, { url: 'http://127.0.0.1:18002', node: 'node-crashed', host: os.hostname(), pidns, pid: dead }, LEASE_TTL_MS);
  const started = performance.now();
  assert.equal(await awaitLeaseFree(claims, moved.storeId, copy, logger), 'node-crashed', 'judged left behind');
  assert.ok(performance.now() - started < 1000, 'no wait for a dead process');
});

test('a lease left by a process killed but not yet reaped (a zombie) is taken at once, not waited out', async (t) => {
  const { claims } = freshClaims();
  // `sleep 60` (exec'ed by the shell) is the parent of the background `sleep 30` and
  // never waits for it: killed, that one stays a zombie until its parent ends.
  const parent = spawn('sh', ['-c', 'sleep 30 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.after(() => parent.kill('SIGKILL'));
  const [line] = await once(parent.stdout, 'data') as [Buffer];
  const zombie = Number(line.toString().trim());
  // Killed while the shell still runs (before its exec), the shell reaps it: no
  // zombie, and its /proc entry is gone (seen once on a loaded machine).
  await waitUntil('the shell has exec\'ed sleep 60', async () => readFileSync(`/proc/${parent.pid}/comm`, 'utf8').trim() === 'sleep', 5000, 10);
  process.kill(zombie, 'SIGKILL');
  await waitUntil('the killed process is a zombie', async () => {
    const stat = readFileSync(`/proc/${zombie}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2) === 'Z';
  }, 5000, 10);
  const pidns = readlinkSync('/proc/self/ns/pid');
  await claims.renewLease('s-zombie', { url: 'http://127.0.0.1:18003', node: 'node-killed', host: os.hostname(), pidns, pid: zombie }, LEASE_TTL_MS);
  const started = performance.now();
  assert.equal(await awaitLeaseFree(claims, 's-zombie', '/data/zombie/xiu', logger), 'node-killed', 'judged left behind');
  assert.ok(performance.now() - started < 1000, `no wait for a zombie: ${Math.round(performance.now() - started)} ms`);
});

test('two copies that both passed the start check: the second to write its lease finds the first one\'s and suspends at once', async (t) => {
  const { claims } = freshClaims();
  const dir = await storeDir(t);
  const a = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  const copy = await storeDir(t);
  await mkdir(copy, { recursive: true });
  await copyFile(path.join(dir, 'LAYOUT'), path.join(copy, 'LAYOUT'));
  const b = await StoreOwnership.claim({ claims, dir: copy, partitions: 4, logger });
  const conflicts: (string | undefined)[] = [];
  await a.advertise({ url: 'http://127.0.0.1:18011', node: 'node-a' }, (reason) => conflicts.push(`a: ${reason}`));
  t.after(() => a.stop());
  await b.advertise({ url: 'http://127.0.0.1:18012', node: 'node-b' }, (reason) => conflicts.push(`b: ${reason}`));
  t.after(() => b.stop());
  // Both start suspended: a's first lease write lifts its suspension, b's finds a's lease.
  assert.equal(conflicts.length, 2, JSON.stringify(conflicts));
  assert.equal(conflicts[0], 'a: undefined');
  assert.match(conflicts[1] ?? '', /^b: message store writes are suspended: .*already served by node node-a at http:\/\/127\.0\.0\.1:18011/);
});

test('a lease from another host is watched: refused as soon as it is renewed, taken once it lapses', async () => {
  const { claims } = freshClaims();
  const remote = { url: 'http://10.0.0.9:8080', node: 'node-far', host: 'far-away', pid: 1 };
  await claims.renewLease('s-far', remote, 600);
  const started = performance.now();
  await awaitLeaseFree(claims, 's-far', '/data/far/xiu', logger);
  const waited = performance.now() - started;
  assert.ok(waited >= 300 && waited < 3000, `waited until it lapsed: ${Math.round(waited)} ms`);

  await claims.renewLease('s-far', remote, 2000);
  const renewing = setInterval(() => void claims.renewLease('s-far', remote, 2000), 100);
  try {
    await assert.rejects(awaitLeaseFree(claims, 's-far', '/data/far/xiu', logger),
      (err: unknown) => err instanceof StartupError && /already served by node node-far at http:\/\/10\.0\.0\.9:8080 \(host far-away, pid 1\)/.test(err.message));
  } finally {
    clearInterval(renewing);
  }
});

test('an older copy of a data dir — its copy ran ahead elsewhere — moves its counters past the ids the store minted, never minting one twice', async (t) => {
  const { claims, keys } = freshClaims();
  const original = await storeDir(t);
  const open = (dir: string, base: number) => MessageStore.open({
    dir, partitions: 4, partitionBase: base, sync: false, cacheBytes: 0, defaultTtlMs: 60_000, maxMessageBytes: 65_536, sweepIntervalMs: 60_000,
  });
  /** One run of a node on `dir`: claim, open, catch up, advertise, `puts` messages, stop; answers the ids minted and what was moved. */
  const run = async (dir: string, node: string, puts: number): Promise<{ ids: string[]; moved: string[] }> => {
    const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
    const store = await open(dir, ownership.partitionBase);
    try {
      const moved = await ownership.catchUpMinted(store);
      await ownership.advertise({ url: 'http://127.0.0.1:18021', node }, () => undefined, store);
      const ids: string[] = [];
      // One recipient: every put lands in the same partition.
      for (let i = 0; i < puts; i++) ids.push((await store.put({ kind: MsgKind.user, type: 't', data: i, to: ['same-user'] })).id);
      return { ids, moved };
    } finally {
      // Stopped on a failure too (its renewals ran on for the rest of the file), and before its store closes.
      await ownership.stop();
      await store.close();
    }
  };
  const first = await run(original, 'node-1', 3);
  // The data dir is copied (stopped), the copy runs and mints more, then stops.
  const copy = await storeDir(t);
  await cp(original, copy, { recursive: true });
  const ran = await run(copy, 'node-copy', 5);
  // The original again: behind what the store minted; it moves past, and mints none of the copy's ids.
  const again = await run(original, 'node-2', 2);
  // It moves RESUME_MARGIN past the copy's record: a copy may have minted more than it
  // recorded (killed between two renewals).
  assert.equal(again.moved.length, 1, JSON.stringify(again.moved));
  assert.equal(again.moved[0]?.replace(/^partition \d+: /, ''), `3 → ${8 + RESUME_MARGIN}`);
  for (const id of again.ids) assert.ok(![...first.ids, ...ran.ids].includes(id), `${id} minted twice`);
  assert.ok(again.ids.every((id) => decodeMsgId(id).counter > 8 + RESUME_MARGIN), JSON.stringify(again.ids));
  // The copy, started again, is now behind the original: it catches up in turn.
  const back = await run(copy, 'node-copy-2', 1);
  const top = 8 + RESUME_MARGIN + 2;
  assert.equal(back.moved[0]?.replace(/^partition \d+: /, ''), `8 → ${top + RESUME_MARGIN}`);
  assert.ok(decodeMsgId(back.ids[0] ?? '').counter > top + RESUME_MARGIN);
  // Recorded counters never go down (a lower write is ignored).
  const { storeId } = await StoreOwnership.claim({ claims, dir: copy, partitions: 4, logger });
  const minted = await redis.hgetall(keys.storeMinted(storeId));
  assert.ok(Object.values(minted).includes(String(top + RESUME_MARGIN + 1)), JSON.stringify(minted));
  await claims.recordMinted(storeId, 0, [0, 0, 0, 0]);
  assert.deepEqual(await redis.hgetall(keys.storeMinted(storeId)), minted);
  // Every partition of a block is recorded, the last one too.
  await claims.recordMinted('four-parts', 4, [1, 2, 3, 4]);
  assert.deepEqual(await claims.mintedOf('four-parts'), new Map([[4, 1], [5, 2], [6, 3], [7, 4]]));
});

test('a copy of a running node\'s data dir started right after Redis lost its data waits for the node\'s lease to come back, and is refused', async (t) => {
  const { claims, keys } = freshClaims();
  const dir = await storeDir(t);
  const original = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  await original.advertise({ url: 'http://127.0.0.1:18031', node: 'node-a' }, () => undefined);
  t.after(() => original.stop());
  const copy = await storeDir(t);
  await mkdir(copy, { recursive: true });
  await copyFile(path.join(dir, 'LAYOUT'), path.join(copy, 'LAYOUT'));
  // FLUSHALL: the claims, the lease, the recorded counters and the claims' age are gone;
  // the running node writes them back at its next renewal (here every 200 ms from 300 ms
  // on, in place of every 5 s).
  await flushPrefix(redis, keys.prefix);
  let renewing: NodeJS.Timeout | undefined;
  const back = setTimeout(() => { renewing = setInterval(() => original.renewNow(), 200); }, 300);
  t.after(() => { clearTimeout(back); clearInterval(renewing); });
  const started = performance.now();
  await assert.rejects(StoreOwnership.claim({ claims, dir: copy, partitions: 4, logger, settleMs: 1500, runningNodes: async () => 1 }), (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, new RegExp(`\\(store ${original.storeId}\\) is already served by node node-a at http://127\\.0\\.0\\.1:18031`));
    return true;
  });
  assert.ok(performance.now() - started >= 1000, `refused after the wait: ${Math.round(performance.now() - started)} ms`);
});

test('a node that another served its partitions beside resumes writes only past every id that one may have minted: a copy of its data dir, then another store that took its block', async (t) => {
  const { claims, keys } = freshClaims();
  const dir = await storeDir(t);
  const log = capturingLogger();
  const ownership = await StoreOwnership.claim({ claims, dir, partitions: 4, logger: log.logger });
  const store = await MessageStore.open({
    dir, partitions: 4, partitionBase: ownership.partitionBase, sync: false, cacheBytes: 0, defaultTtlMs: 60_000, maxMessageBytes: 65_536, sweepIntervalMs: 60_000,
  });
  t.after(async () => {
    await ownership.stop();
    await store.close();
  });
  const states: (string | undefined)[] = [];
  await ownership.advertise({ url: 'http://127.0.0.1:18041', node: 'node-a' }, (reason) => {
    states.push(reason);
    store.suspendWrites(reason);
  }, store);
  /** Renews now, and waits for the `n`th report of the node's state. */
  const renewed = async (n: number): Promise<string | undefined> => {
    ownership.renewNow();
    await waitUntil(`report ${n}`, async () => states.length >= n, 5000, 10);
    return states[n - 1];
  };
  // One recipient: every put lands in the same partition.
  const put = async (): Promise<{ partition: number; counter: number }> =>
    decodeMsgId((await store.put({ kind: MsgKind.user, type: 't', data: 0, to: ['same-user'] })).id);
  const first = await put();
  assert.equal(first.counter, 1);
  const recorded = async (storeId: string): Promise<number | undefined> => (await claims.mintedOf(storeId)).get(first.partition);

  // A copy of the data dir writes its lease in this node's place (started in the moments
  // after a FLUSHALL, before this node wrote its lease back): writes are suspended, and
  // this node's counters are recorded all the same.
  await claims.renewLease(ownership.storeId, { url: 'http://127.0.0.1:18042', node: 'node-copy', host: os.hostname(), pid: 1, renewal: 1 }, LEASE_TTL_MS);
  assert.match(await renewed(2) ?? '', /^message store writes are suspended: .*already served by node node-copy/);
  assert.equal(await recorded(ownership.storeId), 1, 'recorded in the conflict');
  await assert.rejects(put(), /suspended/);
  // The copy minted ids 2..41 there and recorded up to 30 before it was killed; its lease lapses.
  await claims.recordMinted(ownership.storeId, ownership.partitionBase, [30, 30, 30, 30]);
  await claims.releaseLease(ownership.storeId);
  assert.equal(await renewed(3), undefined, 'writes resumed');
  const afterCopy = await put();
  assert.ok(afterCopy.counter > 41, `an id the copy may have minted, minted again: counter ${afterCopy.counter}`);
  assert.equal(afterCopy.counter, 30 + RESUME_MARGIN + 1);
  assert.ok(log.lines.some((l) => /another node served this store's partitions meanwhile/.test(String(l.msg))), 'logged');

  // Two other stores of 2 partitions each take the block (new data dirs, after Redis lost
  // the claims, while this node was cut off) and mint there; an operator settles it, and
  // the block is this node's again.
  await flushPrefix(redis, keys.prefix);
  const base = ownership.partitionBase;
  assert.equal(held(await claims.claim('rival-low', 2, base, HERE)), base);
  assert.equal(held(await claims.claim('rival-high', 2, base + 2, HERE)), base + 2);
  assert.match(await renewed(4) ?? '', /^message store writes are suspended: /);
  const rivalTop = afterCopy.counter + 1000;
  await claims.recordMinted('rival-low', base, [rivalTop, rivalTop]);
  await claims.recordMinted('rival-high', base + 2, [rivalTop + 5, rivalTop + 5]);
  await redis.del(keys.storePartitions());
  assert.equal(await renewed(5), undefined, 'writes resumed');
  // Past each store's ids in each partition, whichever store the claim named.
  const rivalOf = first.partition < base + 2 ? rivalTop : rivalTop + 5;
  const afterRival = await put();
  assert.equal(afterRival.counter, rivalOf + RESUME_MARGIN + 1, 'past the other store\'s ids');
  // Every partition of the block, not only the one the first conflict named.
  assert.deepEqual(store.counters.map((c, i) => c >= (i < 2 ? rivalTop : rivalTop + 5) + RESUME_MARGIN), [true, true, true, true]);

  // A serving node's time floor raised the counters in memory, above the written ones
  // (src/store/time-floor.ts). Another copy serves beside it and records counters past
  // that floor in two partitions only: once alone again, those two move past them, and
  // the error line names those two moves alone, from the counter in use — the other two
  // partitions' targets (2^24 past their records) are below the floor: nothing moves there.
  const floor = rivalTop + 5 + 4 * RESUME_MARGIN;
  assert.equal(store.raiseCounters(floor), 4);
  assert.ok(store.counters.every((c) => c < floor), 'the floor is in memory only');
  log.lines.length = 0;
  await claims.renewLease(ownership.storeId, { url: 'http://127.0.0.1:18043', node: 'node-copy-2', host: os.hostname(), pid: 1, renewal: 1 }, LEASE_TTL_MS);
  assert.match(await renewed(6) ?? '', /^message store writes are suspended: .*already served by node node-copy-2/);
  await claims.recordMinted(ownership.storeId, base, [floor + 10, floor + 20, 0, 0]);
  await claims.releaseLease(ownership.storeId);
  assert.equal(await renewed(7), undefined, 'writes resumed');
  const served = log.lines.filter((l) => /another node served this store's partitions meanwhile/.test(String(l.msg)));
  assert.equal(served.length, 1, JSON.stringify(log.lines));
  assert.deepEqual(served[0]?.moved, [
    `partition ${base}: ${floor} → ${floor + 10 + RESUME_MARGIN}`,
    `partition ${base + 1}: ${floor} → ${floor + 20 + RESUME_MARGIN}`,
  ]);
  assert.deepEqual(store.assignedCounters, [floor + 10 + RESUME_MARGIN, floor + 20 + RESUME_MARGIN, floor, floor], 'what moved, and nothing else');
});

test('a data dir whose block another store held while it was stopped moves past that store\'s ids when it starts again; a restart after a FLUSHALL with other nodes running waits, then starts', async (t) => {
  const { claims, keys } = freshClaims();
  const dir = await storeDir(t);
  const open = (base: number) => MessageStore.open({
    dir, partitions: 4, partitionBase: base, sync: false, cacheBytes: 0, defaultTtlMs: 60_000, maxMessageBytes: 65_536, sweepIntervalMs: 60_000,
  });
  const first = await StoreOwnership.claim({ claims, dir, partitions: 4, logger });
  const store = await open(first.partitionBase);
  // Stopped and closed below, as the scenario; here too, for a test that fails before (both idempotent).
  t.after(async () => {
    await first.stop();
    await store.close();
  });
  await first.advertise({ url: 'http://127.0.0.1:18051', node: 'node-1' }, () => undefined, store);
  await store.put({ kind: MsgKind.user, type: 't', data: 0, to: ['same-user'] });
  await first.stop();
  await store.close();
  // Stopped, the node cannot write its claim back after a FLUSHALL: another store takes
  // the block and mints there; an operator then retires that store's claim.
  await flushPrefix(redis, keys.prefix);
  assert.equal(held(await claims.claim('rival-store', 4, first.partitionBase, HERE)), first.partitionBase);
  await claims.recordMinted('rival-store', first.partitionBase, [700, 700, 700, 700]);
  await redis.del(keys.storePartitions());
  // Started again with another node running on this Redis, claims just lost: it waits for
  // them to settle, then starts on its own block.
  await redis.del(keys.claimsSince());
  const started = performance.now();
  const again = await StoreOwnership.claim({ claims, dir, partitions: 4, logger, settleMs: 1000, runningNodes: async () => 1 });
  assert.ok(performance.now() - started >= 800, `waited ${Math.round(performance.now() - started)} ms`);
  assert.equal(again.partitionBase, first.partitionBase);
  const reopened = await open(again.partitionBase);
  t.after(() => reopened.close());
  const moved = await again.catchUpMinted(reopened);
  assert.equal(moved.length, 4, JSON.stringify(moved));
  const next = decodeMsgId((await reopened.put({ kind: MsgKind.user, type: 't', data: 1, to: ['same-user'] })).id);
  assert.equal(next.counter, 700 + RESUME_MARGIN + 1, 'past the other store\'s ids');
});

test('after Redis lost the claims, a new data dir waits for running nodes to re-assert theirs before it claims; with no node running it claims at once', async (t) => {
  const { claims, keys } = freshClaims();
  const running = await StoreOwnership.claim({ claims, dir: await storeDir(t), partitions: 4, logger });
  assert.equal(running.partitionBase, 0);
  // FLUSHALL of this prefix: the running node has not re-asserted its block yet.
  await redis.del(keys.storePartitions(), keys.storeDescriptions(), keys.claimsSince());
  const reasserted = (async () => {
    await new Promise((resolve) => setTimeout(resolve, 500));
    await claims.claim(running.storeId, 4, 0, HERE);
  })();
  const started = performance.now();
  const waits = capturingLogger();
  const fresh = await StoreOwnership.claim({ claims, dir: await storeDir(t), partitions: 4, logger: waits.logger, settleMs: 1500, runningNodes: async () => 1 });
  await reasserted;
  assert.equal(fresh.partitionBase, 4, 'not the running node\'s block 0..3');
  assert.ok(performance.now() - started >= 1000, `waited ${Math.round(performance.now() - started)} ms`);

  // No node runs on this Redis (a new one, or every node stopped): nothing to wait for.
  await redis.del(keys.storePartitions(), keys.storeDescriptions(), keys.claimsSince());
  const alone = performance.now();
  const first = await StoreOwnership.claim({ claims, dir: await storeDir(t), partitions: 4, logger, settleMs: 60_000, runningNodes: async () => 0, redisUptimeMs: async () => 3_600_000 });
  assert.equal(first.partitionBase, 0);
  assert.ok(performance.now() - alone < 1000);

  // Redis restarted empty moments ago: the running nodes' subscriptions are gone until
  // they reconnect, so none shows; its uptime says to wait all the same.
  await redis.del(keys.storePartitions(), keys.storeDescriptions(), keys.claimsSince());
  const restarted = performance.now();
  const reasserting = (async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    await claims.claim(first.storeId, 4, 0, HERE);
  })();
  const late = await StoreOwnership.claim({ claims, dir: await storeDir(t), partitions: 4, logger: waits.logger, settleMs: 1000, runningNodes: async () => 0, redisUptimeMs: async () => 1500 });
  await reasserting;
  // Each wait says why it waited: nodes running, or a Redis just started (no node named).
  assert.deepEqual(waits.lines.filter((l) => typeof l.why === 'string').map((l) => l.why), ['other nodes run', 'Redis has just started']);
  assert.notEqual(late.partitionBase, 0, 'not the block of the node that re-asserted');
  assert.ok(performance.now() - restarted >= 700, `waited ${Math.round(performance.now() - restarted)} ms`);
});

test('listeningNodes counts the node channels of one key prefix with a subscriber, its glob characters taken literally', async (t) => {
  const keys = new Keys('glob*[x]:');
  const other = new Keys('globz[x]:');
  const subscriber = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  t.after(() => subscriber.quit());
  assert.equal(await listeningNodes(redis, keys), 0);
  await subscriber.subscribe(keys.nodeChannel('n1'), keys.nodeChannel('n2'), other.nodeChannel('n3'));
  assert.equal(await listeningNodes(redis, keys), 2);
  assert.equal(await listeningNodes(redis, other), 1);
});

test('a store written before partition bases keeps base 0 and gets a store id; a half-claimed one claims on the next start', async (t) => {
  const { claims } = freshClaims();
  await claims.claim('first', 8, undefined, HERE);
  const legacy = await storeDir(t);
  await MessageStore.open({
    dir: legacy, partitions: 2, sync: false, cacheBytes: 0, defaultTtlMs: 60_000, maxMessageBytes: 65_536, sweepIntervalMs: 60_000,
  }).then((s) => s.close());
  await writeFile(path.join(legacy, 'LAYOUT'), `${JSON.stringify({ format: 1, partitions: 2, hash: 'fnv1a-32-utf16' })}\n`);
  await assert.rejects(StoreOwnership.claim({ claims, dir: legacy, partitions: 2, logger }), /cannot claim partitions 0\.\.1: partition 0 is held by store first/);
  const layout = JSON.parse(await readFile(path.join(legacy, 'LAYOUT'), 'utf8')) as Record<string, unknown>;
  assert.equal(layout.partitionBase, 0);
  assert.match(String(layout.storeId), /^[0-9a-f]{16}$/);

  // A first start that stopped between writing LAYOUT and pinning its base.
  const half = await storeDir(t);
  await mkdir(half, { recursive: true });
  await writeFile(path.join(half, 'LAYOUT'), `${JSON.stringify({ format: 1, partitions: 2, hash: 'fnv1a-32-utf16', storeId: 'half-done' })}\n`);
  await assert.rejects(checkLayout(half, 2, 0), /has not claimed its partitions yet/);
  const claimed = await StoreOwnership.claim({ claims, dir: half, partitions: 2, logger });
  assert.deepEqual([claimed.storeId, claimed.partitionBase], ['half-done', 8]);
});

test('pure helpers: the claim reply, partition spans, refusal messages, the default advertise URL', () => {
  assert.deepEqual(parseClaimReply([1, 8, 0]), { kind: 'held', base: 8, known: false });
  assert.deepEqual(parseClaimReply([1, 8, 1]), { kind: 'held', base: 8, known: true });
  assert.deepEqual(parseClaimReply([-1]), { kind: 'full' });
  assert.deepEqual(parseClaimReply([0, 3, 'x', '{"dir":"/d","host":"h"}']), { kind: 'conflict', partition: 3, owner: 'x', description: { dir: '/d', host: 'h' } });
  assert.deepEqual(parseClaimReply([0, 3, 'x', '']), { kind: 'conflict', partition: 3, owner: 'x', description: undefined });
  assert.throws(() => parseClaimReply(['?']), /unexpected partition claim reply/);
  assert.equal(partitionSpan(8, 8), '8..15');
  assert.equal(partitionSpan(5, 1), '5');
  assert.match(claimRefusal('/d/xiu', undefined, 8, { kind: 'full' }), /^the store in \/d\/xiu cannot claim 8 partitions: every block of 8/);
  assert.match(claimRefusal('/d/xiu', 16, 8, { kind: 'conflict', partition: 17, owner: 'o', description: undefined }),
    /^the store in \/d\/xiu cannot claim partitions 16\.\.23: partition 17 is held by store o; /);
  assert.equal(defaultAdvertiseUrl('0.0.0.0', 8080), 'http://127.0.0.1:8080');
  assert.equal(defaultAdvertiseUrl('::', 81), 'http://127.0.0.1:81');
  assert.equal(defaultAdvertiseUrl('10.1.2.3', 80), 'http://10.1.2.3:80');
  assert.equal(defaultAdvertiseUrl('fe80::1', 80), 'http://[fe80::1]:80');
  assert.equal(defaultAdvertiseUrl('node-a.internal', 80), 'http://node-a.internal:80');
});
