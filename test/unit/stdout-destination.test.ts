/**
 * The log's destination on a file an earlier run left with a cut last line (it stopped
 * while the disk was full: src/stdout-destination.ts): the first line of this run starts
 * on a line of its own, so it parses (walk16 F2.2); a file ending whole gets nothing
 * added. A real file, written through the destination as the logger writes it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { stdoutDestination } from '../../src/stdout-destination.js';
import { waitUntil } from '../harness/checks.js';

/** Logs one line through the destination on `file` (opened for appending, as `>>` does) and answers the file's text. */
async function logOnce(file: string): Promise<string> {
  const fd = openSync(file, 'a');
  try {
    const stream = stdoutDestination({ recovered: () => undefined, dropped: () => undefined }, fd);
    const logger = pino({ base: null }, stream);
    logger.info('pixiu starting');
    // Its asynchronous writes, in order (a flushSync here could pass the newline still in
    // flight: it writes at once, beside SonicBoom's write on the thread pool).
    await waitUntil('the line written', async () => (await readFile(file, 'utf8')).endsWith('"msg":"pixiu starting"}\n'), 10_000, 5);
    return await readFile(file, 'utf8');
  } finally {
    closeSync(fd);
  }
}

test('a file whose last line was cut gets a newline before this run\'s first line; a whole one gets none', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-log-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const cut = path.join(dir, 'cut.log');
  await writeFile(cut, '{"level":30,"msg":"whole"}\n{"level":30,"time":"2026-12-0');
  const lines = (await logOnce(cut)).split('\n');
  assert.equal(lines[1], '{"level":30,"time":"2026-12-0');
  assert.equal((JSON.parse(lines[2] as string) as { msg: string }).msg, 'pixiu starting');

  const whole = path.join(dir, 'whole.log');
  await writeFile(whole, '{"level":30,"msg":"whole"}\n');
  assert.deepEqual((await logOnce(whole)).split('\n').map((l) => (l === '' ? '' : (JSON.parse(l) as { msg: string }).msg)), ['whole', 'pixiu starting', '']);

  const empty = path.join(dir, 'empty.log');
  await writeFile(empty, '');
  assert.equal((await logOnce(empty)).split('\n')[0]?.startsWith('{'), true);
});
