/**
 * makeDir (src/files/make-dir.ts): a folder that cannot be created is explained — the
 * folder that could not be made and why (read-only, not writable), or the file that
 * stands in the path — where Node's recursive mkdir said only ENOENT (a data dir on a
 * read-only file system read as "no such file or directory"), or, under /proc, never
 * answered.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { explained, makeDir } from '../../src/files/make-dir.js';

test('makeDir creates every missing folder, with the mode given', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-mkdir-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const dir = path.join(root, 'a', 'b', 'c');
  await makeDir(dir, 0o700);
  assert.equal((await stat(dir)).mode & 0o777, 0o700);
  await makeDir(dir);
});

test('makeDir under a folder it may not write names the folder it could not make and why, not ENOENT', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-mkdir-'));
  const locked = path.join(root, 'locked');
  await makeDir(locked);
  let undo = (): unknown => chmod(locked, 0o700);
  // Hooks run in the order registered: the lock is undone before the folder is removed.
  t.after(async () => {
    await undo();
    await rm(root, { recursive: true, force: true });
  });
  if (process.getuid?.() === 0) {
    // Root writes through any mode: a read-only file system is what stops it.
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs', locked], { stdio: 'ignore' });
    } catch {
      t.skip('running as root without the right to mount a read-only tmpfs');
      return;
    }
    undo = () => execFileSync('umount', [locked]);
  } else {
    await chmod(locked, 0o500);
  }
  const target = path.join(locked, 'data', 'secrets');
  // Made one level at a time, the first folder that cannot be made says why itself.
  await assert.rejects(makeDir(target), (err: Error) => {
    assert.equal(err.message.startsWith(`cannot create ${target}: `), true, err.message);
    assert.match(err.message, /EROFS|EACCES/);
    assert.ok(err.message.endsWith(`mkdir '${path.join(locked, 'data')}'`), err.message);
    assert.match(String((err.cause as NodeJS.ErrnoException).code), /^(EROFS|EACCES)$/);
    return true;
  });
});

test('makeDir where making a folder fails with ENOENT though its parent exists (/proc) fails, rather than trying for ever', { timeout: 20_000 }, async () => {
  // Node 20's recursive mkdir made /proc again and again, on a pool thread, never settling.
  const target = '/proc/pixiu-no-such-dir/secrets';
  await assert.rejects(makeDir(target), (err: Error) => {
    // As root: ENOENT on the folder; as another user, /proc is named not writable.
    assert.match(err.message, /^cannot create \/proc\/pixiu-no-such-dir\/secrets: (ENOENT: no such file or directory, mkdir '\/proc\/pixiu-no-such-dir'|\/proc .*is not writable by this user)/);
    return true;
  });
});

test('makeDir where a file stands in the path names that file', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-mkdir-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const file = path.join(root, 'file');
  await writeFile(file, 'x');
  const target = path.join(file, 'data', 'secrets');
  await assert.rejects(makeDir(target), (err: Error) => {
    assert.equal(err.message, `cannot create ${target}: ${file} is a file, not a directory`);
    return true;
  });
  // Reading a file under it is explained the same way.
  const read = await readFile(path.join(file, 'data', 'LAYOUT')).catch((e: unknown) => e);
  assert.equal(await explained(path.join(file, 'data', 'LAYOUT'), read), `${file} is a file, not a directory`);
});

test('makeDir of a path a file holds (a file named like the folder) names that file, not EEXIST', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-mkdir-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const file = path.join(root, 'redis');
  await writeFile(file, '');
  await assert.rejects(makeDir(file), (err: Error) => {
    assert.equal(err.message, `cannot create ${file}: ${file} is a file, not a directory`);
    assert.equal((err.cause as NodeJS.ErrnoException).code, 'EEXIST');
    return true;
  });
  // An existing folder is fine, as mkdir -p has it.
  await makeDir(root);
});

test('makeDir through a symbolic link that points nowhere names the link and where it points, not EEXIST: the link itself or one above it', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-mkdir-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const gone = path.join(root, 'unmounted', 'pixiu');
  const link = path.join(root, 'data');
  await symlink(gone, link);
  for (const target of [link, path.join(link, 'store', 'p0')]) {
    await assert.rejects(makeDir(target), (err: Error) => {
      assert.equal(err.message, `cannot create ${target}: ${link} is a symbolic link to ${gone}, which does not exist`);
      return true;
    });
  }
  // A link to a folder is followed, as mkdir -p follows it.
  await makeDir(gone);
  await makeDir(path.join(link, 'store', 'p0'));
  assert.ok((await stat(path.join(gone, 'store', 'p0'))).isDirectory());
});

test('makeDir through a working link and then one that points nowhere names the second', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-mkdir-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const [real, good, gone] = [path.join(root, 'real'), path.join(root, 'good'), path.join(root, 'gone')];
  await makeDir(real);
  await symlink(real, good);
  await symlink(gone, path.join(real, 'bad'));
  const target = path.join(good, 'bad', 'pixiu');
  await assert.rejects(makeDir(target), (err: Error) => {
    assert.equal(err.message, `cannot create ${target}: ${path.join(good, 'bad')} is a symbolic link to ${gone}, which does not exist`);
    return true;
  });
});

test('makeDir through a loop of symbolic links names the link and the loop', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-mkdir-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const [a, b] = [path.join(root, 'a'), path.join(root, 'b')];
  await symlink(b, a);
  await symlink(a, b);
  await assert.rejects(makeDir(path.join(a, 'secrets')), (err: Error) => {
    assert.equal(err.message, `cannot create ${path.join(a, 'secrets')}: ${a} is a symbolic link to ${b}, which leads back to itself (a loop of links)`);
    return true;
  });
});
