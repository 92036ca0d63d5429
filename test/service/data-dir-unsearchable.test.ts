/**
 * `pixiu serve` run by a user who may not enter a folder above its data dir (a data dir
 * under another user's 0700 folder): the start fails naming that folder, its owner and
 * mode, and this user — not only the file it could not open below it (an ops finding:
 * "cannot read the store layout …/xiu/LAYOUT: EACCES", true but indirect); and one who
 * may not write where the data dir is to be made (walk38 F4). Needs root,
 * to run serve as `nobody` under root's folder.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../harness/pixiu-server.js';

const NOBODY = { uid: 65534, gid: 65534 };

/**
 * A new folder of root's, mode 0755 (removed after the test), for a test that runs serve
 * as nobody below it; undefined, the test skipped, when this process is not root.
 */
async function rootsFolder(t: TestContext, prefix: string): Promise<string | undefined> {
  if (process.getuid?.() !== 0) {
    t.skip('needs root, to run serve as nobody');
    return undefined;
  }
  const root = await realpath(await mkdtemp(path.join(os.tmpdir(), prefix)));
  t.after(() => rm(root, { recursive: true, force: true }));
  await chmod(root, 0o755);
  return root;
}

test('serve as a user who may not enter a folder above the data dir names that folder, its owner and mode, and the user', async (t) => {
  const root = await rootsFolder(t, 'pixiu-unsearchable-');
  if (root === undefined) return;
  const locked = path.join(root, 'locked');
  const dataDir = path.join(locked, 'data');
  await mkdir(path.join(dataDir, 'xiu'), { recursive: true });
  await chmod(locked, 0o700);
  await chmod(dataDir, 0o777);
  const serveAt = (dir: string): ReturnType<typeof runCli> => runCli(['serve'], {
    PIXIU_DATA_DIR: dir, PIXIU_PORT: '0', PIXIU_REDIS_URL: 'redis://127.0.0.1:1',
    PIXIU_API_TOKEN: 'unsearchable-api-token-0123456789', PIXIU_JWT_SECRET: 'unsearchable-jwt-secret-0123456789abcdef',
  }, NOBODY);
  const run = await serveAt(dataDir);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, new RegExp(`LAYOUT: permission denied \\(EACCES\\): ${locked} \\(owner uid 0, mode 0700\\) cannot be entered by this user \\(uid 65534\\): run as a user who may, or let this one in \\(chmod / chown of ${locked}\\)`));
  assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
  // Reached through a symbolic link in an open folder: the folder that blocks is
  // named, and the link — not the link as the folder to chmod (review4 F1).
  await mkdir(path.join(root, 'open'));
  const link = path.join(root, 'open', 'data');
  await symlink(path.join('..', 'locked', 'data'), link);
  const linked = await serveAt(link);
  assert.equal(linked.code, 1, linked.stderr);
  assert.match(linked.stderr, new RegExp(`permission denied \\(EACCES\\): ${locked} \\(owner uid 0, mode 0700\\), reached through the link ${link}, cannot be entered by this user \\(uid 65534\\): run as a user who may, or let this one in \\(chmod / chown of ${locked}\\)`));
});

test('serve as a user who may not write where its data dir is to be made names that folder, its owner and mode — not the folder to be made as one that cannot be entered (walk38 F4)', async (t) => {
  const root = await rootsFolder(t, 'pixiu-unwritable-');
  if (root === undefined) return;
  // No secrets given: the start makes the data dir's secrets/ first, before any Redis.
  const env = { PIXIU_PORT: '0', PIXIU_REDIS_URL: 'redis://127.0.0.1:1' };
  const rule = (folder: string): RegExp => new RegExp(`: ${folder} \\(owner uid 0, mode 0755\\) is not writable by this user \\(uid 65534\\) \\(EACCES\\): `
    + `run as a user who may, or make the folder beforehand for this one \\(chown / chmod of ${folder}, or install -d -o <user> -m 0700 <folder>\\)`);
  // The data dir and its parent are not there yet; root's folder above them is not ours to write.
  const missing = await runCli(['serve'], { ...env, PIXIU_DATA_DIR: path.join(root, 'nx', 'data') }, NOBODY);
  assert.equal(missing.code, 1, missing.stderr);
  assert.match(missing.stderr, rule(root));
  assert.doesNotMatch(missing.stderr, /cannot be entered/);
  // The data dir is there, root's, and not ours to write.
  const existing = path.join(root, 'rootdir');
  await mkdir(existing, { mode: 0o755 });
  await chmod(existing, 0o755);
  const there = await runCli(['serve'], { ...env, PIXIU_DATA_DIR: existing }, NOBODY);
  assert.equal(there.code, 1, there.stderr);
  assert.match(there.stderr, rule(existing));
  assert.doesNotMatch(there.stderr, /\n\s+at /, 'no stack trace');
});
