/**
 * The exit on a log that cannot be written, with no write failed yet: the lines logged
 * in the turn that exits (`shutting down` and `pixiu stopped`; a line and `pixiu
 * crashed`) are written once and given up at the first error, so the process exits at
 * once with its code (src/stdout-exit-flush.ts). Before (review33 F1), the first line's
 * write was still in flight, its ENOSPC not back yet, and SonicBoom's exit flush retried
 * the second line's ENOSPC every 100 ms for good: the process never exited. Real
 * children logging through the service's logger (harness/fixtures/log-then-exit.ts),
 * stdout on /dev/full and on a full tmpfs (root only: that case skips without). And the
 * other side of "once": with room again, the exit's flush writes every held line whole
 * and in order, the line the full disk cut first (it was skipped while writes failed).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { fill, smallDiskLog } from '../harness/small-disk.js';
import { exitsWith, smallDiskLogger, spawnLogChild } from './log-fixture.js';

/** Bound on a child's whole run: a start of node (through tsx from the source) and two lines; the hang was endless. */
const EXIT_BOUND_MS = 15_000;

/** Runs the fixture in `mode` with stdout on `out` and checks it exits with `code` within the bound (killed at the test's end if not). */
async function exitsOn(t: TestContext, out: number, mode: 'stop' | 'crash', code: number): Promise<void> {
  await exitsWith(spawnLogChild(t, [mode], ['ignore', out, 'pipe']), code, EXIT_BOUND_MS, `the ${mode} child's exit`);
}

test('on /dev/full, a graceful stop\'s last two lines and a crash\'s leave the exit at once with its code', { timeout: 60_000 }, async (t) => {
  if (!existsSync('/dev/full')) {
    t.skip('no /dev/full');
    return;
  }
  const full = openSync('/dev/full', 'w');
  t.after(() => closeSync(full));
  await exitsOn(t, full, 'stop', 0);
  await exitsOn(t, full, 'crash', 1);
});

test('on a disk that filled since the last line went through, the same exits come at once', { timeout: 60_000 }, async (t) => {
  const log = await smallDiskLog(t);
  if (log === undefined) {
    t.skip('no right to mount a tmpfs');
    return;
  }
  await fill(log.disk);
  await exitsOn(t, log.fd, 'stop', 0);
  await exitsOn(t, log.fd, 'crash', 1);
});

test('with room again, the exit\'s flush writes every held line whole and in order, the cut one first', { timeout: 60_000 }, async (t) => {
  const log = await smallDiskLogger(t, { recovered: () => undefined, dropped: () => undefined });
  if (log === undefined) return;
  const { disk, file, stream, logger } = log;
  const filler = await fill(disk);
  // The log file's last page has room for a little more: a write of these fills it and
  // fails there, cutting a line.
  const text = 'y'.repeat(1000);
  const failed = once(stream, 'error');
  for (let i = 0; i < 20; i++) logger.info({ i, text }, 'held');
  // In the failure's own turn (nothing in flight, SonicBoom holds the cut line's rest and
  // the others): room again, and the exit's flush, as pino calls it at process.exit.
  let flushedText = '';
  let cutText = '';
  stream.once('error', () => {
    cutText = readFileSync(file, 'utf8');
    rmSync(filler);
    stream.flushSync();
    flushedText = readFileSync(file, 'utf8');
  });
  assert.equal((await failed)[0].code, 'ENOSPC');
  assert.ok(!cutText.endsWith('\n'), 'the full disk cut a line');
  assert.ok(flushedText.endsWith('\n'), `the log ends mid-line: …${flushedText.slice(-80)}`);
  const lines = flushedText.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { msg: string; i?: number });
  assert.deepEqual(lines.map((l) => l.i ?? l.msg), ['before', ...Array.from({ length: 20 }, (_, i) => i)]);
});
