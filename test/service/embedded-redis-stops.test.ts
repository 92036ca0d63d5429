/**
 * Every way `pixiu serve` ends stops its embedded redis-server, which runs in a process
 * group of its own (docs/decisions.md, "Redis"), so no signal or crash of serve reaches
 * it by itself: a stop signal while serve is still starting (a supervisor's SIGTERM,
 * Ctrl-C), SIGHUP (the terminal or ssh session went away), and a crash (an exception
 * no one handled: exit 1, README "The log"). Before, each of these ended serve by
 * Node's default action, or by the crash's exit, and left the redis-server running.
 * And a stdout that can no longer be written (the terminal of a dropped session: EIO
 * after SIGHUP) stops the log, not the service: the write error was an uncaught
 * exception whose crash line failed the same way, and serve hung for good.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { openSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isAlive } from '../../src/process-alive.js';
import { waitUntil } from '../harness/checks.js';
import { spawnCli } from '../harness/cli-process.js';
import { cliEntry } from '../harness/pixiu-server.js';
import { embeddedDataDir } from '../harness/embedded-data-dir.js';
import { blackHole } from '../harness/local-http.js';
import { freePort } from '../harness/redis-server.js';
import { spawnTied } from '../harness/tied-spawn.js';

const API_TOKEN = 'embedded-redis-stops-token-0123456789';

/** Waits for the redis-server `pid` to be gone; fails naming how serve exited. */
async function redisGone(pid: number, exit: unknown): Promise<void> {
  await waitUntil('the embedded redis-server to stop', async () => !isAlive(pid), 15_000)
    .catch(() => assert.fail(`serve exited ${JSON.stringify(exit)} and left its redis-server pid ${pid} running`));
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`${signal} while serve is starting (its redis-server already spawned) stops that redis-server and exits 0`, { timeout: 60_000 }, async (t) => {
    const hole = await blackHole(t);
    const dir = await embeddedDataDir(t);
    // The advertised-URL check waits up to the command timeout for an answer: a start
    // that lasts while the signal comes.
    const serve = spawnCli(['serve'], {
      ...dir.env, PIXIU_PORT: String(await freePort()), PIXIU_API_TOKEN: API_TOKEN,
      PIXIU_ADVERTISE_URL: `http://127.0.0.1:${hole.port}`, PIXIU_REDIS_COMMAND_TIMEOUT: '30s',
    }, t, { detached: true });
    await serve.line((l) => l.includes('local redis-server started'), 'the redis-server line');
    const redisPid = await dir.redisPid();
    assert.ok(redisPid > 0 && isAlive(redisPid));
    await hole.reached; // in the advertised-URL check now
    assert.doesNotMatch(serve.stdout(), /pixiu listening/, 'still starting');
    if (signal === 'SIGINT') serve.signal('SIGINT', { group: true });
    else serve.signal('SIGTERM');
    const exit = await serve.exited;
    await redisGone(redisPid, exit);
    // A stop asked for is a graceful one: exit 0, as after the start.
    assert.deepEqual(exit, { code: 0, signal: null }, serve.stderr());
  });
}

test('SIGHUP (the terminal went away) stops serve gracefully, its embedded redis-server with it', { timeout: 60_000 }, async (t) => {
  const dir = await embeddedDataDir(t);
  const serve = spawnCli(['serve'], { ...dir.env, PIXIU_API_TOKEN: API_TOKEN }, t, { detached: true });
  await serve.line((l) => l.includes('pixiu listening'), 'the listening line');
  const redisPid = await dir.redisPid();
  assert.ok(redisPid > 0 && isAlive(redisPid));
  serve.signal('SIGHUP', { group: true });
  const exit = await serve.exited;
  await redisGone(redisPid, exit);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.match(serve.stdout(), /"msg":"pixiu stopped"/);
});

test('a crash of serve (exit 1) stops its embedded redis-server', { timeout: 60_000 }, async (t) => {
  const preload = fileURLToPath(new URL('../harness/crash-on-signal.mjs', import.meta.url));
  const dir = await embeddedDataDir(t);
  const serve = spawnCli(['serve'], { ...dir.env, PIXIU_API_TOKEN: API_TOKEN, NODE_OPTIONS: `--import ${preload}` }, t);
  await serve.line((l) => l.includes('pixiu listening'), 'the listening line');
  const redisPid = await dir.redisPid();
  assert.ok(redisPid > 0 && isAlive(redisPid));
  serve.proc.kill('SIGUSR2');
  const exit = await serve.exited;
  assert.deepEqual(exit, { code: 1, signal: null }, serve.stderr());
  assert.match(serve.stdout(), /pixiu crashed/);
  await redisGone(redisPid, exit);
});

test('a stdout that fails every write (here /dev/full) stops the log, not the service: it answers, and SIGHUP stops it with its redis-server', { timeout: 60_000 }, async (t) => {
  const dir = await embeddedDataDir(t);
  const port = await freePort();
  const full = openSync('/dev/full', 'w');
  const serve = spawnTied(process.execPath, [...cliEntry(), 'serve'], {
    env: { ...process.env, ...dir.env, PIXIU_PORT: String(port), PIXIU_API_TOKEN: API_TOKEN },
    stdio: ['ignore', full, 'pipe'],
  });
  const exited = once(serve, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  t.after(() => serve.kill('SIGKILL'));
  let stderr = '';
  serve.stderr?.on('data', (c: Buffer) => { stderr += c.toString(); });
  await waitUntil('serve answers', async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000, 100);
  const res = await fetch(`http://127.0.0.1:${port}/v1/messages`, {
    method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to: 'ann', type: 't', data: 1 }),
  });
  assert.equal(res.status, 201, await res.text());
  const redisPid = await dir.redisPid();
  serve.kill('SIGHUP');
  const [code, signal] = await exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
  await redisGone(redisPid, { code, signal });
});
