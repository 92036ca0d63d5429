/**
 * `pixiu serve` run by a user who may not enter a folder above its data dir (a data dir
 * under another user's 0700 folder): the start fails naming that folder, its owner and
 * mode, and this user — not only the file it could not open below it (an ops finding:
 * "cannot read the store layout …/xiu/LAYOUT: EACCES", true but indirect). Needs root,
 * to run serve as `nobody` under root's folder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../harness/pixiu-server.js';

const NOBODY = { uid: 65534, gid: 65534 };

test('serve as a user who may not enter a folder above the data dir names that folder, its owner and mode, and the user', async (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('needs root, to run serve as nobody');
    return;
  }
  const root = await realpath(await mkdtemp(path.join(os.tmpdir(), 'pixiu-unsearchable-')));
  t.after(() => rm(root, { recursive: true, force: true }));
  await chmod(root, 0o755);
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
