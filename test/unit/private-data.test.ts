/**
 * foldersOpenToOthers (src/files/private-data.ts): the data folders other users can
 * reach, for `pixiu serve`'s warn line — a folder with a bit for others, under a data
 * dir (and folders above it) others may search.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { foldersOpenToOthers } from '../../src/files/private-data.js';
import type { CleanupContext } from '../harness/pixiu-server.js';

/** A temp folder, mode 0755, holding `data/` with `redis/`, `xiu/` and `secrets/` at the modes given. */
async function dataDir(t: CleanupContext, modes: { data: number; redis: number; xiu: number; secrets: number }): Promise<string> {
  const root = await realpath(await mkdtemp(path.join(os.tmpdir(), 'pixiu-private-')));
  t.after(() => rm(root, { recursive: true, force: true }));
  await chmod(root, 0o755);
  const data = path.join(root, 'data');
  await mkdir(data);
  for (const name of ['redis', 'xiu', 'secrets'] as const) {
    await mkdir(path.join(data, name));
    await chmod(path.join(data, name), modes[name]);
  }
  await chmod(data, modes.data);
  return data;
}

test('folders with a bit for others under a data dir others may search are named, in order', async (t) => {
  const data = await dataDir(t, { data: 0o755, redis: 0o755, xiu: 0o701, secrets: 0o700 });
  assert.deepEqual(await foldersOpenToOthers(data), [path.join(data, 'redis'), path.join(data, 'xiu')]);
});

test('a data dir others cannot enter hides the folders in it, whatever their modes', async (t) => {
  const data = await dataDir(t, { data: 0o750, redis: 0o755, xiu: 0o755, secrets: 0o755 });
  assert.deepEqual(await foldersOpenToOthers(data), []);
});

test('a folder above the data dir that others cannot search hides it', async (t) => {
  const data = await dataDir(t, { data: 0o755, redis: 0o755, xiu: 0o755, secrets: 0o700 });
  await chmod(path.dirname(data), 0o700);
  assert.deepEqual(await foldersOpenToOthers(data), []);
});

test('bits for the group alone are not counted, and a data dir reached by a symbolic link is judged where it is', async (t) => {
  const data = await dataDir(t, { data: 0o755, redis: 0o750, xiu: 0o770, secrets: 0o700 });
  assert.deepEqual(await foldersOpenToOthers(data), []);
  await chmod(path.join(data, 'redis'), 0o755);
  const link = path.join(path.dirname(data), 'link');
  await symlink(data, link);
  assert.deepEqual(await foldersOpenToOthers(link), [path.join(data, 'redis')]);
});

test('a data dir that does not exist yet, or without the folders, names none', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-private-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await chmod(root, 0o755);
  assert.deepEqual(await foldersOpenToOthers(path.join(root, 'missing')), []);
  assert.deepEqual(await foldersOpenToOthers(root), []);
});
