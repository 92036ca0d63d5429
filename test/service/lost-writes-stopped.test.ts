/**
 * `pixiu redis lost-writes` on a restored data dir with the embedded Redis, its node
 * still stopped (README "Backups and restores": restore, run the command, then start).
 * The command starts the data dir's embedded redis-server as `serve` does, raises the
 * inbox generation, and stops it; the node started afterwards reads the raised
 * generation, so a device resuming with the last_seq and epoch it had before the
 * restore is sent `reset`, not welcomed past the seqs the restore lost and new messages
 * took again (walk21 F3: before, the command refused a stopped data dir — "no embedded
 * Redis running" — and those messages were silently skipped). Real processes, real
 * sockets, the README's `cp -a` commands.
 *
 * Its words say what happened (review35 5): on a redis-server a node killed outright
 * left running, it writes there and says to start the node, which takes that server
 * over (before: "Now repoint or restart the nodes", as for a serving node); with a node
 * starting on the data dir (its lock held), the refusal no longer says the node is
 * stopped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { isAlive } from '../../src/process-alive.js';
import { lockDataDirAt } from '../../src/redis/dir-lock.js';
import { embeddedDataDir, redisServersOf } from '../harness/embedded-data-dir.js';
import { PixiuClient, runCli, spawnServe, tempDataDir, type CleanupContext } from '../harness/pixiu-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';

const API_TOKEN = 'lost-writes-stopped-test-api-token';

/** Posts `texts` to `user`, one request each; answers their ids. */
async function post(api: PixiuClient, user: string, texts: readonly string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const text of texts) {
    const answer = await api.post('/v1/messages', { to: user, type: 'note', data: { text } });
    assert.equal(answer.status, 201, answer.text);
    ids.push((answer.body as { id: string }).id);
  }
  return ids;
}

/** A temp folder removed when the test ends. */
async function tempFolder(t: CleanupContext): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-backup-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('a restored embedded data dir, its node stopped: `pixiu redis lost-writes` raises the generation, and a device resuming with its pre-restore last_seq and epoch is reset, not welcomed past the reused seqs', { timeout: 120_000 }, async (t) => {
  const { dataDir, env: base } = await embeddedDataDir(t);
  const env = { ...base, PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET };
  const user = 'rosa';
  const backup = path.join(await tempFolder(t), 'pixiu-backup');

  let node = await spawnServe(env, t);
  const kept = await post(new PixiuClient(node.url, API_TOKEN), user, ['kept']);
  assert.equal((await node.term()).code, 0);
  execFileSync('cp', ['-a', `${dataDir}/.`, backup]);

  // After the backup: two messages the restore loses, read and acked by the device.
  node = await spawnServe(env, t);
  const lost = await post(new PixiuClient(node.url, API_TOKEN), user, ['lost 2', 'lost 3']);
  const token = await testToken(JWT_KEY, user);
  let phone = await TestClient.connect(node.url, { token, params: { device: 'phone' } });
  const welcome = await phone.nextOf('welcome');
  const epoch = welcome.epoch as string;
  assert.deepEqual((await phone.msgs(3, { ack: true })).map((m) => m.id), [...kept, ...lost]);
  await phone.close();
  assert.equal((await node.term()).code, 0);

  // The restore, node stopped: the data dir replaced by the backup, then the command.
  await rm(dataDir, { recursive: true, force: true });
  execFileSync('cp', ['-a', `${backup}/.`, dataDir]);
  const run = await runCli(['redis', 'lost-writes'], { PIXIU_DATA_DIR: dataDir });
  assert.equal(run.code, 0, run.stderr);
  const raised = /^inbox generation raised from 0 to (\d+) on the embedded Redis of (.*) \(started for this command, the node being stopped, and stopped again\), key prefix "px:": .* Now start the node\.\n$/.exec(run.stdout);
  assert.ok(raised !== null, run.stdout);
  assert.equal(raised[2], dataDir);
  assert.deepEqual(redisServersOf(dataDir), [], 'the redis-server it started is stopped');

  // The node started on the restored data dir reads the raised generation back.
  node = await spawnServe(env, t);
  const read = node.stdout().split('\n').filter((l) => l.includes('"inbox generation read at start'));
  assert.deepEqual(read.map((l) => (JSON.parse(l) as { generation: number }).generation), [Number(raised[1])], node.stdout());
  // Producers go on: seqs 2 and 3 are assigned again.
  const fresh = await post(new PixiuClient(node.url, API_TOKEN), user, ['new 2', 'new 3', 'new 4']);
  phone = await TestClient.connect(node.url, { token, params: { device: 'phone', last_seq: 3, epoch } });
  t.after(() => phone.close());
  await phone.nextOf('welcome');
  const next = await phone.next();
  assert.equal(next.t, 'reset', `resuming at last_seq 3 of the pre-restore epoch must be reset; got ${JSON.stringify(next)}: seqs 2 and 3 (new 2, new 3) would be skipped`);
  assert.notEqual(next.epoch, epoch);
  assert.deepEqual((await phone.msgs(4)).map((m) => [m.seq, m.id]), [[1, kept[0]], [2, fresh[0]], [3, fresh[1]], [4, fresh[2]]]);
});

test('`pixiu redis lost-writes` on a data dir where no embedded Redis ever ran refuses, and makes nothing there', async (t) => {
  const dataDir = await tempDataDir(t);
  const run = await runCli(['redis', 'lost-writes'], { PIXIU_DATA_DIR: dataDir });
  assert.equal(run.code, 1, run.stdout);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, /^pixiu: no PIXIU_REDIS_URL, no embedded Redis running under .*, and no embedded Redis data there \(no .*\/redis\): set PIXIU_DATA_DIR to the data dir of the node/);
  assert.deepEqual(execFileSync('ls', ['-A', dataDir]).toString(), '');
});

test('`pixiu redis lost-writes` on a redis-server a node killed outright left running writes there, leaves it running, and says to start the node, which takes it over and reads the raised generation', { timeout: 120_000 }, async (t) => {
  const { dataDir, env: base, redisPid } = await embeddedDataDir(t);
  const env = { ...base, PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET };
  let node = await spawnServe(env, t);
  const orphan = await redisPid();
  await node.kill();
  assert.ok(isAlive(orphan), 'its redis-server outlives a node killed outright');
  const run = await runCli(['redis', 'lost-writes'], { PIXIU_DATA_DIR: dataDir });
  assert.equal(run.code, 0, run.stderr);
  const raised = /^inbox generation raised from 0 to (\d+) on the embedded Redis of (.*), key prefix "px:": .* A node serving on this data dir reads it within 5 s; if none does \(this redis-server was left running by a node killed outright\), start the node: it takes this redis-server over\.\n$/.exec(run.stdout);
  assert.ok(raised !== null, run.stdout);
  assert.equal(raised[2], dataDir);
  assert.ok(isAlive(orphan), 'written where it runs, and left running');
  node = await spawnServe(env, t);
  assert.match(node.stdout(), /adopting redis-server left running/);
  const read = node.stdout().split('\n').filter((l) => l.includes('"inbox generation read at start'));
  assert.deepEqual(read.map((l) => (JSON.parse(l) as { generation: number }).generation), [Number(raised[1])], node.stdout());
});

test('`pixiu redis lost-writes` while a node is starting on the data dir (its lock held, no node serving yet) refuses, without calling that node stopped', async (t) => {
  const { dataDir } = await embeddedDataDir(t);
  const dir = path.join(dataDir, 'redis');
  await mkdir(dir);
  const lock = await lockDataDirAt(dir, dataDir);
  t.after(() => lock.close());
  const run = await runCli(['redis', 'lost-writes'], { PIXIU_DATA_DIR: dataDir });
  assert.equal(run.code, 1, run.stdout);
  assert.match(run.stderr, /^pixiu: cannot start the embedded Redis of .* \(no node serving on it\): data dir .* is in use: another pixiu is starting or running on it/);
  assert.doesNotMatch(run.stderr, /its node is stopped/);
});
