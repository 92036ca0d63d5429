/**
 * The folder fsync after a LAYOUT write (src/store/layout.ts, src/files/sync-dir.ts),
 * reviewer F8: a file system that refuses fsync on a folder (EINVAL, ENOTSUP,
 * EOPNOTSUPP, EISDIR: some FUSE and network ones) does not fail the write, as in
 * PostgreSQL; another error of it (EIO), or any error of the file's own fsync, does.
 * No file system here refuses it: FileHandle's `sync` is replaced by one that answers a
 * folder's fsync (and only a folder's, told by its fstat) with the error.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../../src/errors.js';
import { dirSyncUnsupported, syncDir } from '../../src/files/sync-dir.js';
import { openLayout, pinPartitionBase } from '../../src/store/layout.js';
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
