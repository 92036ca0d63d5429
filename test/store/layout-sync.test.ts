/**
 * The folder fsync after a LAYOUT write (src/store/layout.ts, src/files/sync-dir.ts),
 * reviewer F8: a file system that refuses fsync on a folder (EINVAL, ENOTSUP,
 * EOPNOTSUPP, EISDIR: some FUSE and network ones) does not fail the write, as in
 * PostgreSQL; another error of it (EIO), or any error of the file's own fsync, does.
 * No file system here refuses it: FileHandle's `sync` is replaced by one that answers a
 * folder's fsync (and only a folder's, told by its fstat) with the error.
 * And the first write of a LAYOUT (src/files/durable-write.ts), reviewer F6/F7: its
 * content is written and fsynced before the file appears under its name (a second
 * start never reads it empty), the folder fsynced after; a temp file of another process
 * with the same pid is never written into. One a killed write left behind is removed
 * when the store opens (the last read: nothing removed a LAYOUT.<pid>.<hex>.tmp), also one
 * with this process's pid, as a container's node has at every start (a review's M2).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { access, open, readFile, readdir, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../../src/errors.js';
import { dirSyncUnsupported, syncDir } from '../../src/files/sync-dir.js';
import { PARTITION_HASH, checkLayout, openLayout, pinPartitionBase, recordWriter, refuseUnreadableStore } from '../../src/store/layout.js';
import { tempDir } from './fixtures/store-harness.js';

/** Makes every fsync (folders only, unless `files`) fail with `code`. */
async function refuseSync(t: TestContext, dir: string, code: string, files = false): Promise<void> {
  const handle = await open(dir, 'r');
  const proto = Object.getPrototypeOf(handle) as { sync(this: typeof handle): Promise<void> };
  await handle.close();
  const original = proto.sync;
  t.mock.method(proto, 'sync', async function (this: typeof handle): Promise<void> {
    if (files || (await this.stat()).isDirectory()) throw Object.assign(new Error(`${code}: fsync refused`), { code });
    return original.call(this);
  });
}

test('the codes of a file system without fsync on folders are told from real failures', () => {
  for (const code of ['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR']) {
    assert.equal(dirSyncUnsupported(Object.assign(new Error(code), { code })), true, code);
  }
  for (const code of ['EIO', 'ENOSPC', 'EROFS', 'EBADF', undefined]) {
    assert.equal(dirSyncUnsupported(Object.assign(new Error(String(code)), { code })), false, String(code));
  }
  assert.equal(dirSyncUnsupported(undefined), false);
});

for (const code of ['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR']) {
  test(`a LAYOUT rewrite on a file system that answers a folder's fsync with ${code} succeeds (reviewer F8)`, async (t) => {
    const dir = await tempDir(t);
    const layout = await openLayout(dir, 4);
    await refuseSync(t, dir, code);
    await syncDir(dir);
    await pinPartitionBase(dir, layout, 8);
    assert.equal((JSON.parse(await readFile(path.join(dir, 'LAYOUT'), 'utf8')) as { partitionBase: number }).partitionBase, 8);
  });
}

test('an EINVAL of the file\'s own fsync, or an EIO of the folder\'s, still fails the write', async (t) => {
  const dir = await tempDir(t);
  const layout = await openLayout(dir, 4);
  await refuseSync(t, dir, 'EINVAL', true);
  await assert.rejects(pinPartitionBase(dir, layout, 8), (err: unknown) => err instanceof StartupError && /cannot write the store layout .*EINVAL/.test(err.message));
  assert.equal((JSON.parse(await readFile(path.join(dir, 'LAYOUT'), 'utf8')) as { partitionBase?: number }).partitionBase, undefined, 'not replaced');
  t.mock.restoreAll();
  await refuseSync(t, dir, 'EIO');
  await assert.rejects(syncDir(dir), /EIO/);
  await assert.rejects(pinPartitionBase(dir, layout, 8), (err: unknown) => err instanceof StartupError && /cannot write the store layout .*EIO/.test(err.message));
});

test('a new LAYOUT is written and fsynced before it appears under its name, then the folder is fsynced; no temp file is left (reviewer F6)', async (t) => {
  for (const create of [(dir: string) => openLayout(dir, 4), (dir: string) => checkLayout(dir, 4)]) {
    const dir = await tempDir(t);
    const file = path.join(dir, 'LAYOUT');
    const seen: string[] = [];
    const handle = await open(dir, 'r');
    const proto = Object.getPrototypeOf(handle) as { sync(this: typeof handle): Promise<void> };
    await handle.close();
    const original = proto.sync;
    const mocked = t.mock.method(proto, 'sync', async function (this: typeof handle): Promise<void> {
      const folder = (await this.stat()).isDirectory();
      const there = await access(file).then(() => true, () => false);
      seen.push(`${folder ? 'folder' : 'file'} fsync, LAYOUT ${there ? (await readFile(file, 'utf8')).length > 0 ? 'full' : 'empty' : 'absent'}`);
      return original.call(this);
    });
    await create(dir);
    mocked.mock.restore();
    assert.deepEqual(seen, ['file fsync, LAYOUT absent', 'folder fsync, LAYOUT full']);
    assert.equal((JSON.parse(await readFile(file, 'utf8')) as { partitions: number }).partitions, 4);
    assert.deepEqual(await readdir(dir), ['LAYOUT'], 'the temp file removed');
  }
});

test('a LAYOUT rewrite never writes into another process\'s temp file, even one with this pid (reviewer F7: two containers on one volume are both pid 1)', async (t) => {
  const dir = await tempDir(t);
  await openLayout(dir, 4);
  const file = path.join(dir, 'LAYOUT');
  await writeFile(file, `${JSON.stringify({ ...JSON.parse(await readFile(file, 'utf8')) as object, writtenBy: '0.0.9 (0000000)' })}\n`);
  // The other process's write in progress, under the name the temp file of this one had before.
  const theirs = `${file}.${process.pid}.tmp`;
  await writeFile(theirs, 'theirs');
  await recordWriter(dir);
  assert.equal(await readFile(theirs, 'utf8'), 'theirs');
  assert.notEqual((JSON.parse(await readFile(file, 'utf8')) as { writtenBy: string }).writtenBy, '0.0.9 (0000000)');
  assert.deepEqual((await readdir(dir)).sort(), ['LAYOUT', path.basename(theirs)], 'no temp file of its own left');
});

test('a LAYOUT temp file a killed write left is removed when the store opens, also one with this pid from before this process began, the LAYOUT intact; one of a running process is left alone', async (t) => {
  for (const opens of [(dir: string) => openLayout(dir, 4), (dir: string) => checkLayout(dir, 4)]) {
    const dir = await tempDir(t);
    await opens(dir);
    const file = path.join(dir, 'LAYOUT');
    const before = await readFile(file, 'utf8');
    // Killed between the temp file's write and its placing: a pid no process has (above
    // pid_max's largest value, 2^22); and a write in progress, of this process's parent.
    const dead = 'LAYOUT.4194305.0a1b2c3d.tmp';
    const live = `LAYOUT.${process.ppid}.0a1b2c3d.tmp`;
    // This pid's, as a container's node has at every start (the review's M2): one the
    // last run left (written before this process began) is removed; one written since,
    // not by this process (another container on the volume, also pid 1), is left alone.
    const ownLeft = `LAYOUT.${process.pid}.0a1b2c3d.tmp`;
    const ownTheirs = `LAYOUT.${process.pid}.0a1b2c3e.tmp`;
    await writeFile(path.join(dir, dead), '{"format":1,"partitions":8');
    await writeFile(path.join(dir, live), '{"format":1,"partitions":4');
    await writeFile(path.join(dir, ownLeft), '{"format":1,"partitions":2');
    const lastRun = new Date(performance.timeOrigin - 60_000);
    await utimes(path.join(dir, ownLeft), lastRun, lastRun);
    await writeFile(path.join(dir, ownTheirs), '{"format":1,"partitions":16');
    await opens(dir);
    assert.deepEqual((await readdir(dir)).sort(), ['LAYOUT', live, ownTheirs].sort());
    assert.equal(await readFile(file, 'utf8'), before);
  }
});

test('a layout from before store ids is read again right before it is given one: a start beside this one that gave it an id since keeps it (the review\'s L10)', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'LAYOUT');
  await writeFile(file, `${JSON.stringify({ format: 1, partitions: 4, hash: PARTITION_HASH })}\n`);
  // Read at the start, before its secrets and Redis (seconds)…
  const found = await refuseUnreadableStore(dir);
  // …while another start gave the store its id.
  await writeFile(file, `${JSON.stringify({ format: 1, partitions: 4, hash: PARTITION_HASH, storeId: 'theirs', partitionBase: 0 })}\n`);
  const layout = await openLayout(dir, 4, found);
  assert.equal(layout.storeId, 'theirs');
  assert.equal((JSON.parse(await readFile(file, 'utf8')) as { storeId: string }).storeId, 'theirs');
});
