/**
 * A data dir restored from a cold backup (README "Backups and restores"; black-box
 * upgrade report, F1): with the embedded Redis its AOF is inside the data dir, so
 * Redis's record of the minted counters (src/cluster/minted-counters.ts) is restored
 * with the store and cannot tell. The node must still mint none of the ids it answered
 * producers with after the backup: the time floor of the counters (src/store/time-floor.ts)
 * puts a serving node's new ids past them. Real `pixiu serve` processes, as an operator
 * runs them: the embedded Redis, and a Redis of its own (PIXIU_REDIS_URL) restored from
 * the same point as the data dir.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cp, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { PixiuClient, spawnServe, tempDataDir, type CleanupContext, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { embeddedDataDir } from '../harness/embedded-data-dir.js';
import { logLines } from '../harness/log-capture.js';

/** Messages per batch, to 12 users (every partition of the default 8 gets some). */
const BATCH = 60;

/** One message as a producer was answered it: its id and what it carried. */
interface Answered {
  readonly id: string;
  readonly data: { batch: string; n: number };
}

/** Posts a batch of messages, each with a `client_msg_id`; all must be stored (201). */
async function postBatch(api: PixiuClient, batch: string): Promise<Answered[]> {
  const out: Answered[] = [];
  for (let n = 0; n < BATCH; n++) {
    const data = { batch, n };
    const answer = await api.post('/v1/messages', { to: `u${n % 12}`, type: 't', data, client_msg_id: `${batch}-${n}` });
    assert.equal(answer.status, 201, answer.text);
    out.push({ id: (answer.body as { id: string }).id, data });
  }
  return out;
}

/** SIGTERM, and a clean exit. */
async function stop(serve: ServeProcess): Promise<void> {
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
}

/** The three runs of a node around a backup, and what each answered. */
interface Runs {
  readonly kept: Answered[];
  readonly lost: Answered[];
  readonly fresh: Answered[];
  /** The node after the restore, still running. */
  readonly restored: ServeProcess;
  readonly api: PixiuClient;
}

/**
 * Runs a node, takes a cold backup (`backUp`, with the node stopped), runs it again,
 * then restores the backup (`restore`, the node stopped) and runs it a third time:
 * `BATCH` messages each run.
 */
async function aroundBackup(
  t: CleanupContext, env: Record<string, string>, token: () => Promise<string>, backUp: () => Promise<void>, restore: () => Promise<void>,
): Promise<Runs> {
  const first = await spawnServe(env, t);
  const kept = await postBatch(new PixiuClient(first.url, await token()), 'kept');
  await stop(first);
  await backUp();
  const second = await spawnServe(env, t);
  const lost = await postBatch(new PixiuClient(second.url, await token()), 'lost');
  await stop(second);
  await restore();
  const restored = await spawnServe(env, t);
  const api = new PixiuClient(restored.url, await token());
  return { kept, lost, fresh: await postBatch(api, 'fresh'), restored, api };
}

/**
 * No new id is one answered before the restore; a lost id reads 404 (or its own
 * message, never another); the backup's messages read as they were; the start logged
 * its time floor once, and no counter ahead of it.
 */
async function checkRestored(runs: Runs): Promise<void> {
  const { kept, lost, fresh, api } = runs;
  const answeredBefore = new Set([...kept, ...lost].map((m) => m.id));
  const reused = fresh.filter((m) => answeredBefore.has(m.id));
  assert.deepEqual(reused.map((m) => m.id), [], `${reused.length} of ${BATCH} new messages took an id answered before the restore`);
  for (const m of lost) {
    const read = await api.get(`/v1/messages/${m.id}`);
    if (read.status === 404) continue;
    assert.equal(read.status, 200, read.text);
    assert.deepEqual((read.body as { data: unknown }).data, m.data, `${m.id} reads another message`);
  }
  for (const m of kept) {
    const read = await api.get(`/v1/messages/${m.id}`);
    assert.equal(read.status, 200, read.text);
    assert.deepEqual((read.body as { data: unknown }).data, m.data);
  }
  // One line a start tells the floor with (not one per partition).
  const floors = logLines(runs.restored.stdout(), FLOOR_LINE);
  assert.equal(floors.length, 1, runs.restored.stdout().slice(-4000));
  assert.equal(floors[0]?.partitions, 8);
  // Every run minted far fewer than 64 ids a ms: no counter is ahead of the floor, and the start does not warn of one.
  assert.deepEqual(logLines(runs.restored.stdout(), AHEAD_LINE), []);
  await stop(runs.restored);
}

const FLOOR_LINE = 'message-id counters start at least at the time floor (64 per ms since 2025-01-01): '
  + 'past every id of an earlier run that started at its floor and minted fewer than 64 a ms in a partition';
const AHEAD_LINE = 'message-id counters are ahead of the time floor (an earlier run minted faster than 64 ids a ms since its start, moved past another store\'s ids, or the clock was set back): '
  + 'a data dir restored from a backup and started less than aheadSeconds after this node\'s last id may mint again ids minted after that backup; wait that long before starting a restored copy';

test('a data dir restored from a cold backup (embedded Redis in it) mints none of the ids it answered after the backup; a lost id reads 404, never another message', { timeout: 120_000 }, async (t) => {
  const { dataDir, env } = await embeddedDataDir(t);
  const backup = path.join(await tempDataDir(t, 'pixiu-backup-'), 'copy');
  const runs = await aroundBackup(t, env, async () => (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim(),
    // The cold backup: the node stopped, the whole data dir copied.
    () => cp(dataDir, backup, { recursive: true }),
    // The disk is lost: the backup is restored in its place.
    async () => {
      await rm(dataDir, { recursive: true, force: true });
      await cp(backup, dataDir, { recursive: true });
    });
  await checkRestored(runs);
});

test('with PIXIU_REDIS_URL, Redis (AOF) and the data dir restored from the same point: no id answered before is minted again', { timeout: 120_000 }, async (t) => {
  const redis = await RedisServer.start({ aof: true });
  t.after(() => redis.destroy());
  const dataDir = await tempDataDir(t);
  const backup = await tempDataDir(t, 'pixiu-backup-');
  const env = {
    PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info', PIXIU_REDIS_URL: redis.url, PIXIU_CLAIMS_SETTLE: '0',
  };
  /** Copies Redis's folder (its AOF) and the data dir from `from` to `to`, Redis stopped. */
  const copyBoth = async (from: { redis: string; data: string }, to: { redis: string; data: string }): Promise<void> => {
    await redis.stop();
    for (const [src, dst] of [[from.redis, to.redis], [from.data, to.data]] as const) {
      await rm(dst, { recursive: true, force: true });
      await cp(src, dst, { recursive: true });
    }
    await redis.restart();
  };
  const live = { redis: redis.dir, data: dataDir };
  const saved = { redis: path.join(backup, 'redis'), data: path.join(backup, 'data') };
  const runs = await aroundBackup(t, env, async () => (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim(),
    () => copyBoth(live, saved), () => copyBoth(saved, live));
  await checkRestored(runs);
});
