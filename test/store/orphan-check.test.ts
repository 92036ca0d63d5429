/**
 * The orphan check (src/store/orphan-check.ts): a store folder with no LAYOUT is refused
 * only when a folder in it is, or may be, a partition. A folder it cannot list counts
 * only when it is named as the store names partitions (digits); `lost+found` (root's,
 * mode 0700, when `xiu/` is a volume of its own) and an operator's folder do not refuse
 * a first start (reviewer F3). The tests run as root, so "cannot list" is a symlink to
 * itself (ELOOP), which no mode keeps root from; the same decision for EACCES is checked
 * on its own.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../../src/errors.js';
import { refuseOrphaning, unlistableIsPartition } from '../../src/store/orphan-check.js';
import { tempDir } from './fixtures/store-harness.js';

/** An error as `readdir` gives it. */
function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code });
}

test('an unlistable folder counts as a partition only when named as one; lost+found never counts', () => {
  assert.equal(unlistableIsPartition('lost+found', errno('EACCES')), false);
  assert.equal(unlistableIsPartition('backup', errno('EACCES')), false);
  assert.equal(unlistableIsPartition('0', errno('EACCES')), true);
  assert.equal(unlistableIsPartition('12', errno('ELOOP')), true);
  assert.equal(unlistableIsPartition('3', errno('ENOENT')), false);
  assert.equal(unlistableIsPartition('3', errno('ENOTDIR')), false);
});

test('a store folder with no LAYOUT whose only unlistable folders are lost+found or not partition-named passes', async (t) => {
  const dir = path.join(await tempDir(t), 'xiu');
  await mkdir(dir);
  await symlink('lost+found', path.join(dir, 'lost+found'));
  await symlink('ops', path.join(dir, 'ops'));
  await mkdir(path.join(dir, '0')); // an empty partition folder: a start that stopped early
  await refuseOrphaning(dir);
});

test('lost+found is ignored even when it holds files named as LevelDB names them', async (t) => {
  const dir = path.join(await tempDir(t), 'xiu');
  await mkdir(path.join(dir, 'lost+found'), { recursive: true });
  await writeFile(path.join(dir, 'lost+found', 'CURRENT'), 'MANIFEST-000001\n');
  await refuseOrphaning(dir);
});

test('an unlistable folder named as a partition still refuses, naming it', async (t) => {
  const dir = path.join(await tempDir(t), 'xiu');
  await mkdir(dir);
  await symlink('3', path.join(dir, '3'));
  await symlink('lost+found', path.join(dir, 'lost+found'));
  await assert.rejects(refuseOrphaning(dir), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.match(err.message, /holds message partitions \(3\)/);
    return true;
  });
});

test('a partition folder whose name is not printable ASCII is named quoted and escaped, a plain one as it is', async (t) => {
  const dir = path.join(await tempDir(t), 'xiu');
  for (const name of ['0', 'old\x1b[31m\u009b']) {
    await mkdir(path.join(dir, name), { recursive: true });
    await writeFile(path.join(dir, name, 'CURRENT'), 'MANIFEST-000001\n');
  }
  await assert.rejects(refuseOrphaning(dir), (err: unknown) => {
    assert.ok(err instanceof StartupError);
    assert.ok(err.message.includes('holds message partitions (0, "old\\u001b[31m\\u009b")'), err.message);
    return true;
  });
});
