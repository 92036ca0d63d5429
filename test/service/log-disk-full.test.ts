/**
 * A log on a disk that fills and then has room again (src/stdout-destination.ts): the
 * lines logged meanwhile are held and written once there is room (within a second or
 * so, with nothing more logged), the line the full
 * disk cut is finished first (the file stays whole JSON lines), one warning says how
 * long stdout could not be written, and the log goes on — later requests and the
 * shutdown are logged. Before (walk13 F1), the first ENOSPC stopped the log until the
 * next restart: the service answered on, and every later line, the shutdown's too,
 * was lost. And a disk with a little room freed, which takes part of the held lines and
 * fails again, is not taken for recovered (review33 F3: it warned so, and the next
 * warning's failedMs counted from there). A real full disk: a small tmpfs, root only
 * (the tests skip without).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { closeSync, openSync, statSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LogRecovered } from '../../src/stdout-destination.js';
import { waitUntil } from '../harness/checks.js';
import { cliEntry, tempDataDir } from '../harness/pixiu-server.js';
import { freePort, RedisServer } from '../harness/redis-server.js';
import { fill, smallDisk } from '../harness/small-disk.js';
import { spawnTied } from '../harness/tied-spawn.js';
import { smallDiskLogger } from './log-fixture.js';

const API_TOKEN = 'log-disk-full-token-0123456789abcdef';

/** The log file's lines, each parsed; fails on a line that is not JSON (a cut line never finished). */
async function lines(file: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(file, 'utf8');
  assert.ok(text === '' || text.endsWith('\n'), `the log ends mid-line: …${text.slice(-80)}`);
  return text.split('\n').filter((l) => l !== '').map((l) => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      return assert.fail(`a log line is not JSON: ${l.slice(0, 200)}`);
    }
  });
}

test('a full log disk holds the lines; with room again they are written whole, a warning says so, and the log goes on to the shutdown', { timeout: 120_000 }, async (t) => {
  const disk = await smallDisk(t, '1m');
  if (disk === undefined) {
    t.skip('no right to mount a tmpfs');
    return;
  }
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const dataDir = await tempDataDir(t);
  const port = await freePort();
  const logFile = path.join(disk, 'pixiu.log');
  const out = openSync(logFile, 'a');
  t.after(() => closeSync(out));
  const serve = spawnTied(process.execPath, [...cliEntry(), 'serve'], {
    env: {
      ...process.env, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: String(port), PIXIU_API_TOKEN: API_TOKEN,
      PIXIU_REDIS_URL: redis.url, PIXIU_LOG_LEVEL: 'debug', PIXIU_CLAIMS_SETTLE: '0',
    },
    stdio: ['ignore', out, 'pipe'],
  });
  const exited = once(serve, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  t.after(() => serve.kill('SIGKILL'));
  let stderr = '';
  serve.stderr?.on('data', (c: Buffer) => { stderr += c.toString(); });
  const base = `http://127.0.0.1:${port}`;
  await waitUntil('serve answers', async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200, 60_000, 100);
  /** A request the node logs (at debug): an unknown route, its path marked `n`. */
  const logged = async (n: string): Promise<void> => {
    assert.equal((await fetch(`${base}/no-such-route/${n}`)).status, 404);
  };
  await logged('before');
  await waitUntil('the line of the request before', async () => (await readFile(logFile, 'utf8')).includes('/no-such-route/before'), 10_000, 50);

  const filler = await fill(disk);
  for (let i = 0; i < 20; i++) await logged(`full-${i}`);
  // The node goes on answering while it cannot log.
  assert.equal((await fetch(`${base}/readyz`)).status, 200);
  await rm(filler);
  const freedAt = Date.now();
  // Nothing more is logged: the held lines are tried again on a timer (a quiet node may
  // log nothing for hours; they waited for the next line: walk16 F2.1).
  await waitUntil('the warning that stdout could not be written', async () => (await readFile(logFile, 'utf8')).includes('stdout could not be written'), 10_000, 50);
  const warnedAfterMs = Date.now() - freedAt;
  await logged('after');
  await logged('later');
  await waitUntil('the line of a later request', async () => (await readFile(logFile, 'utf8')).includes('/no-such-route/later'), 10_000, 50);

  serve.kill('SIGTERM');
  const [code, signal] = await exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
  const all = await lines(logFile);
  const warning = all.find((l) => typeof l.msg === 'string' && l.msg.startsWith('stdout could not be written'));
  assert.ok(warning !== undefined);
  assert.equal(warning.level, 40);
  assert.equal(warning.code, 'ENOSPC');
  assert.equal(warning.droppedLines, 0);
  assert.ok(typeof warning.failedMs === 'number' && warning.failedMs >= 0);
  assert.ok(warnedAfterMs <= 10_000, `written ${warnedAfterMs} ms after the disk had room`);
  // Every line logged while the disk was full came once there was room, in order.
  const text = all.map((l) => JSON.stringify(l)).join('\n');
  const order = ['before', ...Array.from({ length: 20 }, (_, i) => `full-${i}`), 'after', 'later'].map((n) => text.indexOf(`/no-such-route/${n}"`));
  assert.ok(order.every((at) => at >= 0), `lines missing: ${JSON.stringify(order)}`);
  assert.deepEqual([...order].sort((a, b) => a - b), order);
  assert.ok(all.some((l) => l.msg === 'pixiu stopped'), 'the shutdown is logged');
});

test('a disk with a little room freed takes part of the held lines and fails again: not recovered until all are written', { timeout: 60_000 }, async (t) => {
  const recovered: LogRecovered[] = [];
  const log = await smallDiskLogger(t, { recovered: (what) => recovered.push(what), dropped: () => undefined });
  if (log === undefined) return;
  const { disk, file, stream, logger } = log;
  // 8 KiB to free later, then the rest of the disk filled.
  const spare = path.join(disk, 'spare');
  await writeFile(spare, Buffer.alloc(8192, 1));
  const filler = await fill(disk);
  /** The log file's size at each write failure, in order. */
  const sizeAtErrors: number[] = [];
  stream.on('error', () => sizeAtErrors.push(statSync(file).size));
  const text = 'y'.repeat(1000);
  for (let i = 0; i < 40; i++) logger.info({ i, text }, 'held');
  await waitUntil('a write failed', async () => sizeAtErrors.length > 0, 10_000, 20);
  const failedAt = Date.now();
  const sizeFull = sizeAtErrors[0] as number;
  // Room for ~8 KiB of the ~40 KiB held: the retry (every second) writes that much and fails again.
  await rm(spare);
  await waitUntil('a failure after a part went through', async () => sizeAtErrors.some((size) => size > sizeFull), 10_000, 20);
  assert.equal(recovered.length, 0, `recovered while writes still fail: ${JSON.stringify(recovered)}`);
  await rm(filler);
  const freedAt = Date.now();
  await waitUntil('the recovery', async () => recovered.length > 0, 10_000, 20);
  assert.equal(recovered.length, 1);
  const what = recovered[0] as LogRecovered;
  assert.equal(what.code, 'ENOSPC');
  assert.ok(what.failedMs >= freedAt - failedAt, `failedMs ${what.failedMs} counts from the first failure (${freedAt - failedAt} ms before the disk had room)`);
  await waitUntil('every held line', async () => (await readFile(file, 'utf8')).includes('"i":39,'), 10_000, 20);
  const lines = (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { msg: string; i?: number });
  assert.deepEqual(lines.map((l) => l.i ?? l.msg), ['before', ...Array.from({ length: 40 }, (_, i) => i)]);
});
