/**
 * The exit with stdout a pipe whose reader stopped reading (a shell's `|`, a FIFO, the
 * log FIFO of Docker or containerd): the graceful stop exits at once with its code, and
 * the pipe holds whole lines in order, those lost being the last ones
 * (src/stdout-destination.ts writes a pipe through a non-blocking descriptor of its own,
 * synchronously). Before (walk19 F1, F2), stdout — blocking, as a FIFO gives it — held a
 * thread-pool write and the exit's flush in the kernel for good, and Node's exit waits
 * for its thread pool: the process never ended until the reader read again; and then the
 * flush's lines went into the middle of the thread's write, tearing a line. Real
 * children logging through the service's logger (harness/fixtures/log-then-exit.ts,
 * `pile`: ~3 MiB of lines, under the 8 MiB held, over many turns), stdout a FIFO.
 * Compiled (`npm test`), the child's stdout stays blocking as the FIFO gives it, and
 * without the fix the first test times out on the hang; run from the source, tsx's
 * colour check opens process.stdout, which makes the FIFO non-blocking, and without the
 * fix both tests fail on a line left cut or torn instead.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, openSync } from 'node:fs';
import { waitUntil } from '../harness/checks.js';
import { readFifo } from '../harness/fifo.js';
import { exitsWith, spawnLogChild, type LogChild } from './log-fixture.js';

/** Lines the child logs (~1 KiB each): ~3 MiB, far more than a pipe takes (64 KiB), less than the 8 MiB held. */
const LINES = 3000;

/** Bound on a child's whole run: a start of node (through tsx from the source), the lines and at most a few seconds of the exit's waits; the hang was endless. */
const EXIT_BOUND_MS = 20_000;

/** A pile child with stdout a FIFO the test reads only when it chooses, and the FIFO's read. */
async function pileOnFifo(t: TestContext): Promise<LogChild & { read: () => string }> {
  const fifo = await readFifo(t);
  const writer = openSync(fifo.path, 'w');
  const run = spawnLogChild(t, ['pile', String(LINES)], ['ignore', writer, 'pipe']);
  closeSync(writer);
  return { ...run, read: fifo.read };
}

/** The FIFO's text as lines, each parsed (an assertion error names a line that is not JSON): a pile line's `i`, else its `msg`. */
function parsed(text: string): (number | string)[] {
  assert.ok(text === '' || text.endsWith('\n'), `the log ends mid-line: …${text.slice(-80)}`);
  return text.split('\n').filter((l) => l !== '').map((l) => {
    let line: { msg: string; i?: number };
    try {
      line = JSON.parse(l) as { msg: string; i?: number };
    } catch {
      assert.fail(`a torn line: ${l.slice(0, 120)}…${l.slice(-60)}`);
    }
    return line.msg === 'pile line' ? line.i as number : line.msg;
  });
}

test('a graceful stop with stdout a pipe nobody reads exits at once with 0; the pipe holds whole lines in order, the last ones lost', { timeout: 60_000 }, async (t) => {
  const run = await pileOnFifo(t);
  const { stderr, read } = run;
  await exitsWith(run, 0, EXIT_BOUND_MS);
  assert.ok(stderr().includes('pixiu piled'), stderr());
  // Read once the child is gone: what the pipe took is all there is.
  const lines = parsed(read());
  const kept = lines.length;
  assert.ok(kept > 0 && kept < LINES, `${kept} lines in the pipe`);
  assert.deepEqual(lines, Array.from({ length: kept }, (_, i) => i));
  t.diagnostic(`${kept} lines in the pipe, ${LINES - kept + 2} lost at the end (the stop's two lines with them)`);
});

test('a reader that reads again while the exit waits gets every held line, whole and in order, the stop\'s two last', { timeout: 60_000 }, async (t) => {
  const run = await pileOnFifo(t);
  const { stderr, exited, read } = run;
  // The stop follows at once: the exit's flush waits for the pipe (up to 1 s of nothing taken).
  await waitUntil('the child piled its lines', async () => stderr().includes('pixiu piled') || stderr().includes('Error'), EXIT_BOUND_MS, 2);
  assert.ok(stderr().includes('pixiu piled'), stderr());
  let gone = false;
  void exited.then(() => { gone = true; });
  let text = '';
  await waitUntil('the child\'s exit, the pipe read meanwhile', async () => {
    text = read();
    return gone;
  }, EXIT_BOUND_MS, 2);
  await exitsWith(run, 0, EXIT_BOUND_MS);
  assert.deepEqual(parsed(read()), [...Array.from({ length: LINES }, (_, i) => i), 'shutting down', 'pixiu stopped'], `${text.length} bytes read`);
});
