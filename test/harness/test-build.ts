/**
 * Where a test runs from, and how it starts a program of its own.
 *
 * `npm test` runs the tests compiled: scripts/build-tests.mjs type-checks and emits
 * `src/` and `test/` to `.test-build/` (the same tree, `.js`), then `node --test` runs
 * `.test-build/test/…/*.test.js` without a loader — a test file then starts in about
 * half the CPU time it takes through tsx (tsx hooks every import on a loader thread),
 * which over some 220 files is a minute of the suite's wall time on 2 cores. A test
 * run on its own from its source (`node --import tsx --test test/…/x.test.ts`) works
 * the same way: these helpers give paths and node arguments that fit either.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folder, under the repository root, that `npm test` compiles the tests into. */
export const TEST_BUILD_DIR = '.test-build';

/**
 * The repository root (where `package.json`, `src/` and `node_modules` are) as an
 * absolute path without a trailing slash, whether this module runs from `test/harness/`
 * or from `.test-build/test/harness/`.
 */
export const REPO_ROOT = ((): string => {
  const twoUp = path.resolve(fileURLToPath(new URL('../../', import.meta.url)));
  return path.basename(twoUp) === TEST_BUILD_DIR ? path.dirname(twoUp) : twoUp;
})();

/**
 * The absolute path of the module `relative` (written without its extension, e.g.
 * `./fixtures/append-many`) next to the caller: `.ts` when the caller runs from its
 * source, `.js` when it runs compiled.
 * @param callerUrl the caller's `import.meta.url`
 */
export function siblingModule(callerUrl: string, relative: string): string {
  const ext = path.extname(fileURLToPath(callerUrl));
  return fileURLToPath(new URL(`${relative}${ext}`, callerUrl));
}

/**
 * V8's optimization budget for the `pixiu` runs of the tests, as `npm test` gives the
 * test files themselves: eight times the default, so that a run of a few seconds does
 * not spend a third of its CPU optimizing the module loader (docs/decisions.md, "Tests").
 */
export const SHORT_RUN_FLAG = '--interrupt-budget=1048576';

/**
 * The node arguments that run the program `file`: `--import tsx` before a `.ts` file,
 * nothing before a compiled one.
 */
export function nodeArgsFor(file: string): string[] {
  return file.endsWith('.ts') ? ['--import', 'tsx', file] : [file];
}
