/**
 * A stdout reader slower than the log (here a pipe the test does not read for a while):
 * past the 8 MiB the destination holds, lines are dropped with no write failing, and a
 * warning of its own says how many once the log moves again (src/stdout-destination.ts).
 * Before (review33 F2), such drops were only counted into the next write failure's
 * warning, which may never come: they went unreported. A real child logging through the
 * service's logger (harness/fixtures/log-then-exit.ts, `flood`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { exitsWith, spawnLogChild } from './log-fixture.js';

/** Lines the child logs in one turn: ~10 MiB, more than the 8 MiB held. */
const LINES = 120_000;

const DROP_WARNING = 'log lines were dropped';

test('lines dropped for a slow stdout reader are warned of with their count, once the log moves again', { timeout: 120_000 }, async (t) => {
  const run = spawnLogChild(t, ['flood', String(LINES)], ['pipe', 'pipe', 'pipe']);
  const { child, stderr } = run;
  // stdout is not read until the child has logged every line: the pipe fills, and the
  // destination holds what it can.
  await waitUntil('the child flooded its log', async () => stderr().includes('pixiu flooded') || child.exitCode !== null, 60_000, 20);
  assert.ok(stderr().includes('pixiu flooded'), stderr());
  let out = '';
  child.stdout?.on('data', (c: Buffer) => { out += c.toString(); });
  // The warning is logged behind the lines held before it: all of them are in by its end.
  await waitUntil('the warning of dropped lines', async () => out.includes(DROP_WARNING) && out.indexOf('\n', out.indexOf(DROP_WARNING)) >= 0, 30_000, 50);
  child.stdin?.end();
  await exitsWith(run, 0, 10_000);
  const lines = out.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { msg: string; i?: number; droppedLines?: number; level: number });
  const warnings = lines.filter((l) => l.msg.startsWith(DROP_WARNING));
  assert.equal(warnings.length, 1, JSON.stringify(warnings));
  const warning = warnings[0] as { level: number; droppedLines?: number };
  assert.equal(warning.level, 40);
  const written = lines.filter((l) => l.msg === 'flood line').map((l) => l.i as number);
  assert.ok(written.length < LINES, 'some lines were dropped');
  // Every line logged is written or counted, and those written are in order.
  assert.equal(written.length + (warning.droppedLines ?? 0), LINES);
  assert.deepEqual([...written].sort((a, b) => a - b), written);
});
