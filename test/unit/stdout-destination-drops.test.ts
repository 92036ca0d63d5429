/**
 * Lines the log's destination drops with no write failing (src/stdout-destination.ts):
 * a line longer than the 8 MiB it holds, and the lines past 8 MiB held for a reader that
 * takes nothing for a while. Each gets a warning of its own with the count, thinned to
 * one per LOG_DROP_WARN_MS, written once there is room for it. Before (review33 F2),
 * such drops were only counted into the next write failure's warning, which may never
 * come. A real file and a real FIFO, written through the destination as the logger
 * writes them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, constants, openSync, writeSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { LOG_HOLD_MAX_BYTES, stdoutDestination } from '../../src/stdout-destination.js';
import { waitUntil } from '../harness/checks.js';
import { readFifo } from '../harness/fifo.js';

const DROP_WARNING = 'log lines were dropped';

/** A logger on `fd` through the destination, warning of drops as src/logger.ts does; answers it and the counts reported. */
function dropLogger(fd: number): { logger: Logger; reported: number[] } {
  const reported: number[] = [];
  const logger: Logger = pino({ base: null, timestamp: false }, stdoutDestination({
    recovered: () => undefined,
    dropped: (lines) => {
      reported.push(lines);
      logger.warn({ droppedLines: lines }, DROP_WARNING);
    },
  }, fd));
  return { logger, reported };
}

/**
 * Fills the pipe `fifo` (its reader open, reading nothing) with newlines until the
 * kernel takes no more (EAGAIN). @returns the bytes written
 */
function fillPipe(fifo: string): number {
  const filling = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  let written = 0;
  try {
    for (;;) written += writeSync(filling, Buffer.alloc(4096, 0x0a));
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, 'EAGAIN');
  } finally {
    closeSync(filling);
  }
  return written;
}

test('a line longer than 8 MiB is dropped and warned of; another within the thinning interval waits for a later warning', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-log-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'pixiu.log');
  const fd = openSync(file, 'a');
  t.after(() => closeSync(fd));
  const { logger, reported } = dropLogger(fd);
  const huge = 'z'.repeat(LOG_HOLD_MAX_BYTES);
  logger.info({ huge }, 'huge');
  await waitUntil('the warning', async () => (await readFile(file, 'utf8')).includes(DROP_WARNING), 10_000, 20);
  logger.info({ huge }, 'huge again');
  logger.info('after');
  await waitUntil('the line after', async () => (await readFile(file, 'utf8')).includes('"after"'), 10_000, 20);
  const lines = (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { msg: string; droppedLines?: number });
  assert.deepEqual(lines, [{ level: 40, droppedLines: 1, msg: DROP_WARNING }, { level: 30, msg: 'after' }]);
  assert.deepEqual(reported, [1]);
});

test('lines past 8 MiB held for a reader that takes nothing are counted, and warned of once there is room for the warning', { timeout: 60_000 }, async (t) => {
  const { path: fifo, read } = await readFifo(t);
  const fd = openSync(fifo, 'w');
  t.after(() => closeSync(fd));
  // The pipe full before the first line: every write of the destination waits for the
  // reader, and nothing it holds is released until the test reads.
  const prefill = fillPipe(fifo);
  const { logger, reported } = dropLogger(fd);
  // ~42 bytes a line (~10 MiB in all): the room left under 8 MiB when the first is dropped is smaller
  // than the warning, so the first warning is dropped too and must be tried again.
  const count = 250_000;
  for (let i = 0; i < count; i++) logger.info({ i }, 'flood line');
  await waitUntil('a warning tried', async () => reported.length > 0, 10_000, 20);
  let out = '';
  await waitUntil('the warning read', async () => {
    out = read();
    const at = out.indexOf(DROP_WARNING);
    return at >= 0 && out.indexOf('\n', at) >= 0;
  }, 30_000, 2);
  const lines = out.slice(prefill).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { msg: string; i?: number; droppedLines?: number });
  const warnings = lines.filter((l) => l.msg === DROP_WARNING);
  assert.equal(warnings.length, 1);
  const written = lines.filter((l) => l.msg === 'flood line').map((l) => l.i as number);
  // Every line is written or counted; the warning that found no room was not counted.
  assert.equal(written.length + (warnings[0]?.droppedLines ?? 0), count);
  assert.ok(reported.length >= 2, `the first warning found room already (${JSON.stringify(reported)}): the set-up did not test its retry`);
  assert.ok(reported.every((n) => n === warnings[0]?.droppedLines), JSON.stringify(reported));
});

test('a warning of drops that found no room is tried again only after a write goes through, not at each later drop', { timeout: 60_000 }, async (t) => {
  const { path: fifo, read } = await readFifo(t);
  const fd = openSync(fifo, 'w');
  t.after(() => closeSync(fd));
  // The pipe full before the first line, as above: nothing goes through until the test reads.
  fillPipe(fifo);
  const { logger, reported } = dropLogger(fd);
  // Past 8 MiB held: the first warning finds no room.
  for (let i = 0; i < 250_000; i++) logger.info({ i }, 'flood line');
  await waitUntil('a warning tried', async () => reported.length > 0, 10_000, 20);
  // More lines dropped one by one, each given a turn of the loop for a timer to run.
  for (let i = 0; i < 200; i++) {
    logger.info({ i }, 'later line');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  assert.equal(reported.length, 1, `the warning was tried again with the pipe still full: ${reported.length} tries`);
  // Once the test reads, a write goes through and the warning is tried again, and written.
  await waitUntil('the warning read', async () => read().includes(DROP_WARNING), 30_000, 2);
  assert.ok(reported.length >= 2);
});
