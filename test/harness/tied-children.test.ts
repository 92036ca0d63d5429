/**
 * The harness's children die with the test process that started them, however it dies
 * (tied-spawn.ts): a test file SIGKILLed by node:test's per-file timeout, or a runner
 * killed in CI, ran no clean-up, and its `pixiu serve` child and redis-servers ran on
 * for the rest of the run, holding CPU and ports.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { TiedParentReport } from './fixtures/tied-parent.js';
import { REPO_ROOT, nodeArgsFor, siblingModule } from './test-build.js';
import { spawnTied } from './tied-spawn.js';

const FIXTURE = siblingModule(import.meta.url, './fixtures/tied-parent');
/** How long the children may outlive their parent, ms: the kernel signals them as it reaps it. */
const DEATH_BOUND_MS = 5_000;

/** True while `pid` is a process that has not exited (a zombie not yet reaped counts as exited). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // The state is the field after the parenthesised name: `pid (comm) S …`.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

test('a SIGKILLed test process takes its redis-server, pixiu serve and spawnCli children with it', {
  skip: process.platform === 'linux' ? false : 'the parent-death signal is Linux only',
  timeout: 90_000,
}, async (t) => {
  const parent = spawnTied(process.execPath, nodeArgsFor(FIXTURE), { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(parent, 'exit');
  t.after(() => {
    if (parent.exitCode === null && parent.signalCode === null) parent.kill('SIGKILL');
  });
  assert.ok(parent.stdout !== null);
  const lines = createInterface({ input: parent.stdout });
  const [line] = (await Promise.race([once(lines, 'line'), exited.then(() => [undefined])])) as [string | undefined];
  assert.ok(line !== undefined, 'the fixture exited before it reported its children');
  const report = JSON.parse(line) as TiedParentReport;
  t.after(async () => {
    // What outlived the check (a failing run) is this test's to stop.
    for (const pid of Object.values(report.pids)) if (alive(pid)) process.kill(pid, 'SIGKILL');
    for (const dir of report.dirs) await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
  });
  const pids = Object.entries(report.pids);
  assert.equal(pids.length, 3, line);
  for (const [name, pid] of pids) assert.ok(typeof pid === 'number' && alive(pid), `${name} runs before the kill`);

  parent.kill('SIGKILL');
  await exited;
  // Polled: a process that is not our child has no exit event to wait on.
  const deadline = performance.now() + DEATH_BOUND_MS;
  let running = pids.filter(([, pid]) => alive(pid));
  while (running.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    running = running.filter(([, pid]) => alive(pid));
  }
  assert.deepEqual(running.map(([name]) => name), [], `still running ${DEATH_BOUND_MS} ms after their parent was SIGKILLed`);
});
