/**
 * README "Backups and restores", "What the start detects": a store folder whose
 * `xiu/LAYOUT` was lost, with no backup, is rebuilt by hand from the store's claim —
 * read from the node's `store partitions claimed` log line, or from the claim hashes of
 * a shared Redis (`PIXIU_REDIS_URL`) with `redis-cli` — as one line of JSON. These tests
 * follow the README's procedure literally on real `pixiu serve` processes: the start
 * without the file is refused, and with the rebuilt one every message reads back by id
 * and in its inbox, and new messages are stored and read.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { PixiuClient, spawnServe, tempDataDir, type CleanupContext, type ServeProcess } from '../harness/pixiu-server.js';
import { spawnCli } from '../harness/cli-process.js';
import { embeddedDataDir } from '../harness/embedded-data-dir.js';
import { logLines } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';

/** Users the messages go to (two each). */
const USERS = 12;

/** One stored message: its id, its user, what it carried. */
interface Sent {
  readonly id: string;
  readonly to: string;
  readonly data: { n: number };
}

async function tokenOf(dataDir: string): Promise<string> {
  return (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim();
}

/** Posts `count` messages from `from` on, to u0..u11 in turn; each must be stored (201). */
async function post(api: PixiuClient, from: number, count: number): Promise<Sent[]> {
  const sent: Sent[] = [];
  for (let n = from; n < from + count; n++) {
    const message = { to: `u${n % USERS}`, data: { n } };
    const answer = await api.post('/v1/messages', { ...message, type: 't' });
    assert.equal(answer.status, 201, answer.text);
    sent.push({ id: (answer.body as { id: string }).id, ...message });
  }
  return sent;
}

/** SIGTERM, and a clean exit. */
async function stop(serve: ServeProcess): Promise<void> {
  assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
}

/** A start without LAYOUT: refused, exit 1, one line naming the rebuild (README "Backups and restores"). */
async function refusedWithoutLayout(dataDir: string, env: Record<string, string>, t: CleanupContext): Promise<void> {
  const run = spawnCli(['serve'], env, t);
  const status = await run.exited;
  assert.equal(status.code, 1, run.stderr());
  assert.match(run.stderr(), /^pixiu: the store layout \S+LAYOUT is missing, but .* rebuild it from the store's claim .*\(README "Backups and restores"\)\n$/);
  assert.doesNotMatch(run.stdout(), /pixiu listening/);
  assert.deepEqual(await readdir(path.join(dataDir, 'xiu')).then((names) => names.includes('LAYOUT')), false, 'nothing written');
}

/** The partition folders in `xiu/` (README: as many as the block has partitions). */
async function partitionFolders(dataDir: string): Promise<number> {
  const entries = await readdir(path.join(dataDir, 'xiu'), { withFileTypes: true });
  return entries.filter((e) => e.isDirectory() && /^[0-9]+$/.test(e.name)).length;
}

/** Writes `xiu/LAYOUT` as the README's one line of JSON. */
async function writeRebuilt(dataDir: string, storeId: string, partitions: number, partitionBase: number): Promise<void> {
  const line = `{"format":1,"partitions":${partitions},"hash":"fnv1a-32-utf16","storeId":"${storeId}","partitionBase":${partitionBase}}`;
  await writeFile(path.join(dataDir, 'xiu', 'LAYOUT'), `${line}\n`);
}

/**
 * Every message reads back by id and in its user's inbox (history, in order), and a new
 * one is stored and read the same way; the LAYOUT keeps the rebuilt store id.
 */
async function checkRebuilt(serve: ServeProcess, dataDir: string, sent: Sent[], storeId: string): Promise<void> {
  const api = new PixiuClient(serve.url, await tokenOf(dataDir));
  const fresh = await post(api, sent.length, USERS);
  for (const m of [...sent, ...fresh]) {
    const read = await api.get(`/v1/messages/${m.id}`);
    assert.equal(read.status, 200, `${m.id}: ${read.text}`);
    assert.deepEqual((read.body as { data: unknown }).data, m.data);
  }
  for (let u = 0; u < USERS; u++) {
    const history = await api.get(`/v1/users/u${u}/messages?after_seq=0&limit=100`);
    assert.equal(history.status, 200, history.text);
    const page = history.body as { messages: Array<{ id: string; data: unknown }>; gaps: unknown[] };
    const expected = [...sent, ...fresh].filter((m) => m.to === `u${u}`);
    assert.deepEqual(page.messages.map((m) => [m.id, m.data]), expected.map((m) => [m.id, m.data]), `u${u}`);
    assert.deepEqual(page.gaps, [], `u${u}: no gap`);
  }
  const layout = JSON.parse(await readFile(path.join(dataDir, 'xiu', 'LAYOUT'), 'utf8')) as { storeId: string };
  assert.equal(layout.storeId, storeId, 'the same store');
  // Nothing at warn or above: not a store Redis does not know, not one behind its ids.
  const loud = serve.stdout().split('\n').filter((line) => /^\{"level":(4|5|6)0/.test(line));
  assert.deepEqual(loud, []);
}

/** `48..55` (or `48` for one partition), as the log line writes `partitions`: the base and the count. */
function block(span: string): { base: number; count: number } {
  const [first, last = first] = span.split('..').map(Number);
  return { base: first as number, count: (last as number) - (first as number) + 1 };
}

test('a lost xiu/LAYOUT rebuilt from the node\'s "store partitions claimed" log line, as README says: the messages read back (embedded Redis)', { timeout: 120_000 }, async (t) => {
  const { dataDir, env } = await embeddedDataDir(t, 'pixiu-rebuild-');
  const first = await spawnServe(env, t);
  const sent = await post(new PixiuClient(first.url, await tokenOf(dataDir)), 0, 2 * USERS);
  await stop(first);
  // What the README says to read: the node's earlier logs.
  const claimed = logLines(first.stdout(), 'store partitions claimed');
  assert.equal(claimed.length, 1, first.stdout().slice(-4000));
  const storeId = claimed[0]?.store as string;
  const { base, count } = block(claimed[0]?.partitions as string);

  await rm(path.join(dataDir, 'xiu', 'LAYOUT'));
  await refusedWithoutLayout(dataDir, env, t);
  assert.equal(await partitionFolders(dataDir), count, 'as many partition folders as the block has partitions');
  await writeRebuilt(dataDir, storeId, count, base);

  const again = await spawnServe(env, t);
  await checkRebuilt(again, dataDir, sent, storeId);
  await stop(again);
});

/** `redis-cli -u URL HGETALL key`, as README "Several nodes" runs it: field → value. */
async function hgetall(url: string, key: string): Promise<Map<string, string>> {
  const { stdout } = await promisify(execFile)('redis-cli', ['-u', url, 'HGETALL', key]);
  const words = stdout.split('\n').filter((line, i, all) => i < all.length - 1 || line !== '');
  const out = new Map<string, string>();
  for (let i = 0; i + 1 < words.length; i += 2) out.set(words[i] as string, words[i + 1] as string);
  return out;
}

test('a lost xiu/LAYOUT rebuilt from the claim hashes of a shared Redis (PIXIU_REDIS_URL), as README says: the messages read back', { timeout: 120_000 }, async (t) => {
  const redis = await RedisServer.start({ aof: true });
  t.after(() => redis.destroy());
  const envOf = (dataDir: string): Record<string, string> => ({
    PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_LOG_LEVEL: 'info', PIXIU_REDIS_URL: redis.url, PIXIU_CLAIMS_SETTLE: '0',
  });
  // Another data dir on the same Redis first: its store takes the first block, this one the next.
  const other = await tempDataDir(t, 'pixiu-rebuild-other-');
  await stop(await spawnServe(envOf(other), t));
  const dataDir = await tempDataDir(t, 'pixiu-rebuild-');
  const env = envOf(dataDir);
  const first = await spawnServe(env, t);
  const sent = await post(new PixiuClient(first.url, await tokenOf(dataDir)), 0, 2 * USERS);
  await stop(first);

  await rm(path.join(dataDir, 'xiu', 'LAYOUT'));
  await refusedWithoutLayout(dataDir, env, t);
  // What the README says to read: the entry of the stores hash whose description names this folder, and the partitions naming its id.
  const stores = await hgetall(redis.url, 'px:xiu:{store}:stores');
  const folder = path.join(dataDir, 'xiu');
  const named = [...stores].filter(([, description]) => (JSON.parse(description) as { dir: string }).dir === folder);
  assert.equal(named.length, 1, `exactly one store id names ${folder}: ${JSON.stringify([...stores])}`);
  const storeId = named[0]?.[0] as string;
  const claims = await hgetall(redis.url, 'px:xiu:{store}:partitions');
  const mine = [...claims].filter(([, owner]) => owner === storeId).map(([partition]) => Number(partition)).sort((a, b) => a - b);
  assert.equal(mine.length, await partitionFolders(dataDir), 'as many partitions as partition folders');
  assert.ok(mine[0] as number > 0, `the second store's block is not the first: ${mine.join(',')}`);
  await writeRebuilt(dataDir, storeId, mine.length, mine[0] as number);

  const again = await spawnServe(env, t);
  await checkRebuilt(again, dataDir, sent, storeId);
  await stop(again);
});
