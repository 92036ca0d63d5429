/**
 * npm's `prepare` script (scripts/prepare.mjs) where TypeScript is not installed, as
 * after `npm ci --omit=dev` (README, "Running in production"): it builds nothing and
 * exits 0 with one line saying whether dist/ is there, where `npm run build` failed the
 * install with "tsc: not found" (an ops newcomer's finding). The run with TypeScript
 * installed is every `npm ci` of this repository.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../harness/test-build.js';

const SCRIPT = path.join(REPO_ROOT, 'scripts/prepare.mjs');

/** A package root of its own under the temp dir: no node_modules above it, so no TypeScript. */
async function packageRoot(t: TestContext): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-prepare-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await mkdir(path.join(root, 'scripts'));
  await copyFile(SCRIPT, path.join(root, 'scripts', 'prepare.mjs'));
  await writeFile(path.join(root, 'package.json'), '{"name":"pixiu","type":"module"}\n');
  return root;
}

/** Runs the script as npm does (from the package root); throws on a non-zero exit. */
async function prepare(root: string): Promise<string> {
  const { stderr } = await promisify(execFile)(process.execPath, ['scripts/prepare.mjs'], { cwd: root });
  return stderr;
}

test('without TypeScript, prepare skips the build over a built dist/ and says so: exit 0', async (t) => {
  const root = await packageRoot(t);
  await mkdir(path.join(root, 'dist', 'cli'), { recursive: true });
  await writeFile(path.join(root, 'dist', 'cli', 'main.js'), '');
  assert.match(await prepare(root), /^pixiu: TypeScript is not installed \(dev dependencies left out\), so the build is skipped: dist\/ as built before is what runs\n$/);
});

test('without TypeScript and without dist/, prepare exits 0 saying how to build it', async (t) => {
  const root = await packageRoot(t);
  assert.match(await prepare(root), /^pixiu: TypeScript is not installed \(dev dependencies left out\) and dist\/ is not built: build it where dev dependencies are installed \(npm ci && npm run build\), then copy dist\/ here or prune with npm prune --omit=dev\n$/);
});
