/**
 * A redis-server left running on a data dir that does not answer (docs/decisions.md,
 * "Embedded Redis"; src/redis/left-server.ts): a `pixiu serve` SIGKILLed while its
 * embedded Redis was frozen (SIGSTOP; a long fsync, a paused container) left it behind.
 * The next start must neither adopt it (it cannot be asked anything) nor start a second
 * redis-server beside it on the same AOF (a black-box tester's finding: the orphan wrote
 * into the live AOF once it ran again; its AOF rewrite rolled inboxes back). It refuses,
 * naming the pid and what to do; once the server answers, a start adopts it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isAlive, processState } from '../../src/process-alive.js';
import { startLocalRedis } from '../../src/redis/local-server.js';
import { listeningUrl, spawnCli } from '../harness/cli-process.js';
import { waitUntil } from '../harness/checks.js';
import { embeddedDataDir, redisServersOf } from '../harness/embedded-data-dir.js';
import { capturingLogger } from '../harness/log-capture.js';
import { PixiuClient, spawnServe } from '../harness/pixiu-server.js';

test('a redis-server left running but not answering (SIGSTOP) by a SIGKILLed serve is not doubled: the start exits 1 naming it, and once continued it is adopted', { timeout: 90_000 }, async (t) => {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);
  // Every redis-server on this test's data dir is one its serves started: stopped or not, SIGKILL ends it.
  t.after(() => { for (const pid of redisServersOf(dataDir)) process.kill(pid, 'SIGKILL'); });
  const first = await spawnServe(env, t);
  const token = (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim();
  const sent = await new PixiuClient(first.url, token).post('/v1/messages', { to: 'ida', type: 't', data: 1 });
  assert.equal(sent.status, 201, sent.text);
  const frozen = Number(await readFile(pidFile, 'utf8'));
  process.kill(frozen, 'SIGSTOP');
  await first.kill();

  const second = spawnCli(['serve'], env, t);
  const listened = await second.line((l) => listeningUrl(l) !== undefined, 'the listening line').then(() => true, () => false);
  assert.equal(listened, false, `the start listened beside the frozen redis-server: servers on the data dir ${redisServersOf(dataDir).join(', ')} (frozen: ${frozen})`);
  assert.deepEqual(await second.exited, { code: 1, signal: null });
  assert.deepEqual(redisServersOf(dataDir), [frozen], 'no second redis-server on the data dir');
  assert.equal(processState(frozen), 'T', 'the frozen server is left as it was: neither killed nor continued');
  assert.equal(Number(await readFile(pidFile, 'utf8')), frozen);
  const stderr = second.stderr();
  assert.ok(stderr.startsWith(`pixiu: data dir ${dataDir} is in use by a redis-server that does not answer: pid ${frozen} (named in ${pidFile}) did not answer on `
    + `${path.join(dataDir, 'redis', 'redis.sock')} within 5 s, and a second redis-server on the same append-only file would corrupt it, so none is started. `
    + `It is stopped (state T: SIGSTOP, a debugger, a paused container): continue it with \`kill -CONT ${frozen}\` and start again, and it is adopted. `
    + `Or stop it and start again: \`kill ${frozen}\``), stderr);
  const waited = second.lines().map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === 'the redis-server left running on this data dir does not answer; waiting for it (a second one is never started beside it)');
  assert.equal(waited?.redisPid, frozen, second.stdout());
  assert.equal(waited?.level, 40);

  process.kill(frozen, 'SIGCONT');
  const third = await spawnServe(env, t);
  assert.match(third.stdout(), new RegExp(`"redisPid":${frozen},"msg":"adopting redis-server left running`));
  const history = await new PixiuClient(third.url, token).get('/v1/users/ida/messages');
  assert.deepEqual((history.body as { messages: Array<{ data: unknown }> }).messages.map((m) => m.data), [1], history.text);
  assert.deepEqual(await third.term(), { code: 0, signal: null }, third.stderr());
  assert.ok(!isAlive(frozen), 'the adopted server is stopped with the serve that adopted it');
});

test('a left-over redis-server that answers within the wait is adopted: one frozen when its serve was SIGKILLed, continued while the next start waits', { timeout: 60_000 }, async (t) => {
  const { dataDir, env, pidFile } = await embeddedDataDir(t);
  t.after(() => { for (const pid of redisServersOf(dataDir)) process.kill(pid, 'SIGKILL'); });
  const first = await spawnServe(env, t);
  const left = Number(await readFile(pidFile, 'utf8'));
  process.kill(left, 'SIGSTOP');
  await first.kill();
  const second = spawnCli(['serve'], env, t);
  await second.line((l) => l.includes('"msg":"the redis-server left running on this data dir does not answer'), 'the wait\'s warning');
  process.kill(left, 'SIGCONT');
  await second.line((l) => listeningUrl(l) !== undefined, 'the listening line');
  assert.match(second.stdout(), new RegExp(`"redisPid":${left},"msg":"adopting redis-server left running`));
  assert.deepEqual(redisServersOf(dataDir), [left]);
  second.signal('SIGTERM');
  assert.deepEqual(await second.exited, { code: 0, signal: null }, second.stderr());
  assert.ok(!isAlive(left), 'stopped with the serve that adopted it');
});

test('a pid file naming a frozen redis-server of another data dir (a reused pid) neither blocks the start nor has that server stopped', { timeout: 60_000 }, async (t) => {
  const { dataDir, pidFile } = await embeddedDataDir(t);
  // Its socket's path holds this data dir's whole socket path: only the whole word may match.
  const otherDir = path.join(`${dataDir}-other`, dataDir);
  t.after(() => rm(`${dataDir}-other`, { recursive: true, force: true }));
  const other = await startLocalRedis({ dataDir: otherDir, logger: capturingLogger().logger });
  const otherPid = Number(await readFile(path.join(otherDir, 'redis', 'redis.pid'), 'utf8'));
  t.after(async () => {
    process.kill(otherPid, 'SIGCONT');
    await other.stop();
  });
  process.kill(otherPid, 'SIGSTOP');
  await mkdir(path.dirname(pidFile), { recursive: true });
  await writeFile(pidFile, `${otherPid}\n`);
  const { logger, lines } = capturingLogger();
  const local = await startLocalRedis({ dataDir, logger });
  const started = Number(await readFile(pidFile, 'utf8'));
  await local.stop();
  assert.equal(local.owned, true, 'started, not adopted');
  assert.notEqual(started, otherPid);
  assert.equal(processState(otherPid), 'T', 'the other data dir\'s server is left as it was');
  assert.ok(lines.some((l) => l.redisPid === otherPid && l.msg?.startsWith('the redis pid file names a process that is not this data dir\'s redis-server') === true),
    JSON.stringify(lines.map((l) => l.msg)));
});
