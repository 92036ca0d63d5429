/**
 * Which build of Pixiu this is: the package's version (package.json) and the git
 * commit its code comes from, so that an operator can tell releases apart (`pixiu
 * --version`, the `pixiu listening` log line, the LAYOUT's `writtenBy`: README,
 * "Upgrades").
 *
 * The commit of a build is captured when it is built: `npm run build` runs
 * scripts/build-info.mjs, which writes `dist/build-info.json` (`{"commit": …}`) with
 * {@link sourceCommit}. Run from the sources (tsx, or a `dist/` built without that
 * step), the commit is read from git at the first call. Either way it is `unknown`
 * when the tree is no git checkout (a tarball, an image built without `.git`) or git
 * cannot tell.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** What a build is. */
export interface BuildInfo {
  /** package.json's `version`, e.g. `0.1.0`, or `unknown`. */
  readonly version: string;
  /**
   * The commit's short hash (e.g. `c01b527`), with `-dirty` when tracked files differed
   * from it, or `unknown`.
   */
  readonly commit: string;
}

/** The package root: this module runs from `src/` or `dist/` just below it. */
const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Runs `git <args>` in `root`; its trimmed output, or undefined when it fails. */
function git(root: string, args: readonly string[]): string | undefined {
  const run = spawnSync('git', ['--no-optional-locks', '-C', root, ...args], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] });
  return run.status === 0 ? run.stdout.trim() : undefined;
}

/**
 * The commit the tree at `root` is checked out at, as {@link BuildInfo.commit} says.
 * Only a tree with its own `.git` (a folder, or a worktree's file) is asked: git would
 * otherwise answer for whatever repository holds the folder.
 * @param root a package root
 */
export function sourceCommit(root: string): string {
  if (!existsSync(path.join(root, '.git'))) return 'unknown';
  const head = git(root, ['rev-parse', '--short', 'HEAD']);
  if (head === undefined || !/^[0-9a-f]{4,40}$/.test(head)) return 'unknown';
  const changes = git(root, ['status', '--porcelain', '--untracked-files=no']);
  return changes === undefined || changes === '' ? head : `${head}-dirty`;
}

/** The commit `dist/build-info.json` recorded at build time, if this module runs from such a build. */
function builtCommit(): string | undefined {
  try {
    const info = JSON.parse(readFileSync(new URL('./build-info.json', import.meta.url), 'utf8')) as { commit?: unknown };
    return typeof info.commit === 'string' && info.commit !== '' ? info.commit : undefined;
  } catch {
    return undefined;
  }
}

let memo: BuildInfo | undefined;

/** package.json's `version`, or `unknown` when it cannot be read (a tree without it). */
function packageVersion(): string {
  try {
    const { version } = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: unknown };
    return typeof version === 'string' && version !== '' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** This build's version and commit (read once). Never throws: what cannot be read is `unknown`. */
export function buildInfo(): BuildInfo {
  memo ??= { version: packageVersion(), commit: builtCommit() ?? sourceCommit(PACKAGE_ROOT) };
  return memo;
}

/** This build as one line: `0.1.0 (c01b527)`, what `pixiu --version` prints. */
export function versionLine(): string {
  const { version, commit } = buildInfo();
  return `${version} (${commit})`;
}
