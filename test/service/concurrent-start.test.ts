/**
 * Two `pixiu serve` started at once on one data dir (a supervisor and a
 * person, two `npm start`s). One must refuse to start and leave the other and its
 * redis-server alone (docs/decisions.md: a second start on a data dir in use exits 1
 * with "data dir … is in use", and the running one is untouched). The embedded Redis's
 * start holds a lock on `<dataDir>/redis/lock` (src/redis/local-server.ts). Before it, both
 * spawned a redis-server on the one AOF folder and socket; the one that then lost the
 * store's LevelDB lock stopped its redis-server, which removed the shared socket file:
 * the survivor logged `pixiu listening` and answered 503 for good.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { listeningUrl, spawnCli, type CliProcess } from '../harness/cli-process.js';
import { REPO_ROOT } from '../harness/pixiu-server.js';
import { freePort } from '../harness/redis-server.js';

const API_TOKEN = 'concurrent-start-token-0123456789';

/** Pids of redis-server processes whose command line names `dir`. */
function redisServersOf(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.startsWith('redis-server') && cmd.includes(dir)) pids.push(Number(entry));
    } catch { /* gone */ }
  }
  return pids;
}

/** Resolves with the URL once it listens, or undefined once it has exited. */
function outcome(serve: CliProcess): Promise<string | undefined> {
  return serve.line((l) => listeningUrl(l) !== undefined, 'the listening line').then((l) => listeningUrl(l), () => undefined);
}

test('two serves started at once on one data dir: one refuses, the other keeps working', { timeout: 90_000 }, async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-twice-'));
  t.after(async () => {
    await delay(500);
    for (const pid of redisServersOf(dataDir)) process.kill(pid, 'SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });
  const env = { PIXIU_DATA_DIR: dataDir, PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info' };
  // The built CLI (npm start's): without tsx's compile time, the two starts meet.
  const main = path.join(REPO_ROOT, 'dist', 'cli', 'main.js');
  const [portA, portB] = [await freePort(), await freePort()];
  const a = spawnCli([], env, t, { command: [process.execPath, main, 'serve', '--port', String(portA)] });
  const b = spawnCli([], env, t, { command: [process.execPath, main, 'serve', '--port', String(portB)] });
  const [urlA, urlB] = await Promise.all([outcome(a), outcome(b)]);
  const urls = [urlA, urlB].filter((u) => u !== undefined);
  assert.equal(urls.length, 1, `exactly one serve runs\nA:\n${a.stderr()}\nB:\n${b.stderr()}`);
  const loser = urlA === undefined ? a : b;
  assert.equal((await loser.exited).code, 1);
  // The loser stops what it started before it exits: one redis-server is left, at once.
  assert.equal(redisServersOf(dataDir).length, 1, 'one redis-server on the data dir');
  const res = await fetch(`${urls[0]}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to: 'ann', type: 't', data: 1 }),
  });
  assert.equal(res.status, 201, `the serve that runs takes messages: ${await res.text()}`);
  const ready = await fetch(`${urls[0]}/readyz`);
  assert.equal(ready.status, 200);
});

test('two starts of the embedded Redis of one data dir at once: one redis-server, the other start refused', { timeout: 60_000 }, async (t) => {
  const { startLocalRedis } = await import('../../src/redis/local-server.js');
  const { createLogger } = await import('../../src/logger.js');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-twice-lib-'));
  t.after(async () => {
    for (const pid of redisServersOf(dataDir)) process.kill(pid, 'SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });
  const logger = createLogger('silent');
  const results = await Promise.allSettled([startLocalRedis({ dataDir, logger }), startLocalRedis({ dataDir, logger })]);
  const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
  const servers = redisServersOf(dataDir).length;
  for (const s of started) await s.stop();
  assert.equal(servers, 1, `redis-servers running on ${dataDir}`);
  assert.equal(started.length, 1);
  assert.match(refused[0]?.message ?? '', /in use/);
});
