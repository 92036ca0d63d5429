/**
 * The data dir's layout format (src/store/layout.ts `LAYOUT_FORMAT`): `pixiu serve` on
 * a data dir whose `xiu/LAYOUT` holds a format above this release's (written by a newer
 * release), or no positive integer, or none, exits 1 with one line saying so, before
 * it writes or starts anything — the data dir is left as it was; format 1, with a field
 * this release does not know, starts. The same for a LAYOUT that is gone while the
 * store's partitions are not (it would start as a new store and orphan them), and one
 * that lost its `storeId`. A serving start names its build in `writtenBy`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PixiuClient, runCli, runEach, spawnServe, type CleanupContext, type CliResult } from '../harness/pixiu-server.js';
import { spawnCli } from '../harness/cli-process.js';
import { embeddedDataDir } from '../harness/embedded-data-dir.js';

/** Every file and folder under `dir` with its size, mode and modification time: what a write changes. */
async function tree(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    // `parentPath` from Node 20.12 on; `path`, its older name, before (engines: >= 20.10).
    const full = path.join((entry as { parentPath?: string }).parentPath ?? entry.path, entry.name);
    const s = await stat(full);
    out.push(`${path.relative(dir, full)} ${entry.isDirectory() ? 'dir' : s.size} ${s.mode.toString(8)} ${s.mtimeMs}`);
  }
  return out.sort();
}

/** `pixiu serve` run to its exit; one that starts listening instead is stopped (SIGTERM) and fails the test. */
async function serveToExit(env: Record<string, string>, t: CleanupContext): Promise<CliResult> {
  const run = spawnCli(['serve'], env, t);
  const listened = await run.line((l) => l.includes('"pixiu listening"'), 'its exit').then(() => true, () => false);
  if (listened) run.signal('SIGTERM');
  const status = await run.exited;
  assert.ok(!listened, `it started:\n${run.stdout()}`);
  return { ...status, stdout: run.stdout(), stderr: run.stderr() };
}

test('a LAYOUT of a newer format, or a damaged one, is refused with one line and the data dir untouched; format 1 with an unknown field starts', { timeout: 120_000 }, async (t) => {
  const { dataDir, env } = await embeddedDataDir(t, 'pixiu-format-');
  // A real data dir: store, secrets, the embedded Redis's AOF.
  const first = await spawnServe(env, t);
  assert.deepEqual(await first.term(), { code: 0, signal: null }, first.stderr());
  const file = path.join(dataDir, 'xiu', 'LAYOUT');
  const written = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  assert.equal(written.format, 1, 'this release writes format 1');
  // The build that wrote it is named in the refusal when the file has one (the second case).
  delete written.writtenBy;

  const newer = (format: number, by = ''): RegExp => new RegExp(`^pixiu: the store in ${path.join(dataDir, 'xiu')} was written by a newer release of Pixiu `
    + `\\(format ${format}${by}\\); this release reads format 1: start the release that wrote it\\n$`);
  const damaged = (what: string): RegExp => new RegExp(`^pixiu: the store layout ${file} is damaged: ${what}; restore the data dir from a backup\\n$`);
  const { format: _, ...noFormat } = written;
  const cases: Array<[Record<string, unknown> | string, RegExp]> = [
    [{ ...written, format: 2 }, newer(2)],
    [{ ...written, format: 99, writtenBy: '0.9.0 (abcdef1)' }, newer(99, ', last written by "0\\.9\\.0 \\(abcdef1\\)"')],
    // Quoted, escaped and cut: a newline, a terminal escape (C0 and C1) or a long value cannot break or forge the one line.
    [{ ...written, format: 2, writtenBy: '0.9.0\n\x1b[31mpixiu: ok\u009b' }, newer(2, ', last written by "0\\.9\\.0\\\\n\\\\u001b\\[31mpixiu: ok\\\\u009b"')],
    [{ ...written, format: 2, writtenBy: 'x'.repeat(500) }, newer(2, `, last written by "${'x'.repeat(80)}"…`)],
    // A number JSON holds as Infinity is named as the file writes it.
    [`{"format":1e400,"partitions":${String(written.partitions)},"hash":"fnv1a-32-utf16"}`, damaged('its "format" 1e400 is not a positive integer')],
    [{ ...written, format: '\x1b]0;x\x07' }, damaged('its "format" "\\\\u001b\\]0;x\\\\u0007" is not a positive integer')],
    [{ ...written, format: 'banana' }, damaged('its "format" "banana" is not a positive integer')],
    [{ ...written, format: 0 }, damaged('its "format" 0 is not a positive integer')],
    [{ ...written, format: 1.5 }, damaged('its "format" 1.5 is not a positive integer')],
    [{ ...written, format: null }, damaged('its "format" null is not a positive integer')],
    [noFormat, damaged('it has no "format"')],
  ];
  // One at a time: each run sees only its own LAYOUT.
  await runEach(cases, async ([layout, message]) => {
    const text = `${typeof layout === 'string' ? layout : JSON.stringify(layout)}\n`;
    await writeFile(file, text);
    const before = await tree(dataDir);
    const run = await serveToExit(env, t);
    assert.equal(run.code, 1, `${text}: ${run.stderr}`);
    assert.match(run.stderr, message, text);
    assert.doesNotMatch(run.stdout, /pixiu listening|redis-server/, `${text}: nothing started`);
    assert.deepEqual(await tree(dataDir), before, `${text}: the data dir is untouched`);
    assert.equal(await readFile(file, 'utf8'), text, 'the LAYOUT as it was');
  }, 1);

  // Only the store (its secrets kept elsewhere, say): no secret is generated beside it either.
  const bare = await embeddedDataDir(t, 'pixiu-format-bare-');
  await mkdir(path.join(bare.dataDir, 'xiu'));
  await writeFile(path.join(bare.dataDir, 'xiu', 'LAYOUT'), `${JSON.stringify({ ...written, format: 2 })}\n`);
  const bareBefore = await tree(bare.dataDir);
  const refused = await serveToExit(bare.env, t);
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, /^pixiu: the store in .* was written by a newer release of Pixiu \(format 2\)[^\n]*\n$/);
  assert.deepEqual(await tree(bare.dataDir), bareBefore, 'nothing generated, nothing started');

  // Format 1 starts, a field this release does not know (a newer release of the same format may add one) is no reason to refuse.
  await writeFile(file, `${JSON.stringify({ ...written, newField: 'x' })}\n`);
  const again = await spawnServe(env, t);
  assert.deepEqual(await again.term(), { code: 0, signal: null }, again.stderr());
});

/** Refused with one line on stderr, nothing started, the data dir as it was; the line. */
async function refusedUntouched(dataDir: string, env: Record<string, string>, t: CleanupContext): Promise<string> {
  const before = await tree(dataDir);
  const run = await serveToExit(env, t);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /^pixiu: [^\n]*\n$/, 'one line');
  assert.doesNotMatch(run.stdout, /pixiu listening|redis-server|partitions claimed/, 'nothing started');
  assert.deepEqual(await tree(dataDir), before, 'the data dir is untouched');
  return run.stderr;
}

test('a LAYOUT gone while the partitions hold messages, or one that lost its storeId, is refused before anything is written; put back, the messages read as before (verifier F1)', { timeout: 120_000 }, async (t) => {
  const { dataDir, env } = await embeddedDataDir(t, 'pixiu-no-layout-');
  const first = await spawnServe(env, t);
  const api = new PixiuClient(first.url, (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim());
  const ids: string[] = [];
  for (let n = 0; n < 24; n++) {
    const answer = await api.post('/v1/messages', { to: `u${n}`, type: 't', data: { n } });
    assert.equal(answer.status, 201, answer.text);
    ids.push((answer.body as { id: string }).id);
  }
  assert.deepEqual(await first.term(), { code: 0, signal: null }, first.stderr());
  const store = path.join(dataDir, 'xiu');
  const file = path.join(store, 'LAYOUT');
  const kept = await readFile(file, 'utf8');

  await rm(file);
  const missing = await refusedUntouched(dataDir, env, t);
  assert.equal(missing, `pixiu: the store layout ${file} is missing, but ${store} holds message partitions (0, 1, 2, 3, 4, 5, 6, 7): `
    + 'started without it, this data dir would become a new store and every message in them would be orphaned; '
    + 'restore xiu/LAYOUT from the backup the data dir came from; without one, rebuild it from the store\'s claim '
    + 'or move xiu/ aside to start a new store on purpose (README "Backups and restores")\n');

  // Without its storeId (the rest kept): damaged, refused before a new id is written into it.
  const { storeId, ...noId } = JSON.parse(kept) as Record<string, unknown>;
  await writeFile(file, `${JSON.stringify(noId)}\n`);
  assert.match(await refusedUntouched(dataDir, env, t),
    /^pixiu: the store layout .*LAYOUT is damaged: it has a "partitionBase" but no "storeId"; restore it from the backup the data dir came from/);

  // Put back: the same store, its messages read.
  await writeFile(file, kept);
  const again = await spawnServe(env, t);
  const back = new PixiuClient(again.url, api.token);
  for (const id of [ids[0], ids[23]]) assert.equal((await back.get(`/v1/messages/${id}`)).status, 200, id);
  assert.deepEqual(await again.term(), { code: 0, signal: null }, again.stderr());
  assert.equal((JSON.parse(await readFile(file, 'utf8')) as { storeId?: unknown }).storeId, storeId, 'the same store');

  // A store folder with no partition data (empty folders: nothing was ever stored there) is a new store.
  const fresh = await embeddedDataDir(t, 'pixiu-no-layout-fresh-');
  await mkdir(path.join(fresh.dataDir, 'xiu', '0'), { recursive: true });
  const started = await spawnServe(fresh.env, t);
  assert.deepEqual(await started.term(), { code: 0, signal: null }, started.stderr());
});

test('a serving start names its build as the LAYOUT\'s writtenBy, in place of another build\'s or none (verifier F2)', { timeout: 120_000 }, async (t) => {
  const printed = (await runCli(['--version'])).stdout.trim();
  const { dataDir, env } = await embeddedDataDir(t, 'pixiu-written-by-');
  const first = await spawnServe(env, t);
  assert.deepEqual(await first.term(), { code: 0, signal: null }, first.stderr());
  const file = path.join(dataDir, 'xiu', 'LAYOUT');
  const layout = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  const { writtenBy: _, ...none } = layout;
  for (const older of [{ ...layout, writtenBy: '0.0.9 (0000000)' }, none]) {
    await writeFile(file, `${JSON.stringify(older)}\n`);
    const serve = await spawnServe(env, t);
    // Written once the node serves, before its listening line.
    assert.deepEqual(JSON.parse(await readFile(file, 'utf8')), { ...layout, writtenBy: printed });
    assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
    assert.deepEqual(await readdir(path.dirname(file)).then((names) => names.filter((n) => n.endsWith('.tmp'))), [], 'no temp file left');
  }
});
