// How `npm test` runs the compiled test files: which share one `node --test` process (a
// group) and which keep a process of their own. scripts/build-tests.mjs writes the groups
// (`.test-build/test/<dir>/_group-N.test.js`) and the plan (`.test-build/test-plan.json`);
// scripts/test-order.mjs hands the groups and the files kept alone to `node --test`.
//
// Why groups: about 60 % of the suite's CPU was the fixed cost of each small file — a
// process, the runner's child, importing the service and its packages, V8 warming up
// (~0.7 – 1 CPU s a file on the 2-core VM). A file imported into a group pays it once
// per group: measured 15 api/ files 23.6 → 7.7 CPU s, 12 gateway/channels files 24.1 →
// 5.7 s (docs/decisions.md, "Tests").
//
// A group file wraps each file it runs in `describe('<source path>', …)` around a
// dynamic import: node:test puts the file's top-level tests (and its top-level
// before/after/beforeEach/afterEach hooks) under that suite, so a failure in the test
// report reads `test/api/x.test.ts` > `<test name>`, with the source file and line
// (`test at …`), and one file's hooks never run around another file's tests. A member that
// throws as it is imported gets, in its suite, a test `test/<dir>/x.test.ts (import)` that
// throws that error: counted in `# fail` (exit code 1) as the file alone would be. A suite
// whose own function throws fails too, but node:test 20 counts it under `# suites` only:
// the run failed with `# fail 0` in its summary.
//
// What a group does not isolate: anything the files' shared process holds — globals,
// timers, listeners, environment, the module instances of src/ and test/harness/ (one
// per process). So a file stays alone (its own process, as before) when
//   - it is in LONGEST (a long file gains nothing from sharing and would unbalance a group);
//   - its source matches one of HAZARDS below (checked at every build, so a new file that
//     mocks timers or listens on `process` is kept alone without anyone remembering);
//   - its source carries the marker comment `// test-isolation: own-process (why)`,
//     for what no pattern catches: module-level state of src/ another file could see.
// Everything else is packed per directory (first fit, longest first) into groups of at most
// GROUP_MAX_FILES files and ~GROUP_BUDGET_S seconds of measured wall (scripts/test-walls.tsv),
// so that the six slots of `--test-concurrency=6` stay balanced.
//
// A test that fails in its group fails alone too (the same code, the same assertions),
// and to check one alone: `node --import tsx --test test/<dir>/<name>.test.ts`.
import { readFileSync } from 'node:fs';

/** Where scripts/build-tests.mjs compiles the tests. */
export const ROOT = '.test-build/test';
/** The plan build-tests.mjs writes and test-order.mjs reads. */
export const PLAN_FILE = '.test-build/test-plan.json';

/**
 * The longest files, longest first (wall seconds of one `npm test` run at load ~6 in the
 * comments, 2026-12-06): started first by test-order.mjs, and never grouped.
 */
export const LONGEST = [
  'service/cli-connect', // 106
  'service/cli', // 100
  'service/shutdown', // 86
  'gateway/backpressure', // 83
  'service/layout-format', // 81
  'service/crash', // 80
  'service/embedded-redis', // 80
  'service/cli-serve', // 68
  'cluster/prefix-split', // 65
  'service/restore-backup', // 50
  'service/redis-url', // 48
  'service/cli-inspect', // 43
  'gateway/delivery', // 42
  'api/bad-input', // 42
];

/** A group's budget: the sum of its files' measured walls run alone (scripts/test-walls.tsv). */
export const GROUP_BUDGET_S = 36;
/** At most this many files in one group (the unit/ files take well under a second each). */
export const GROUP_MAX_FILES = 24;
/** The wall a file not in scripts/test-walls.tsv counts as (about the suite's median). */
export const DEFAULT_WALL_S = 5;
/** A file is grouped only if it takes less than this alone; a longer one is a group by itself. */
const GROUPABLE_UNDER_S = 30;

/** The comment that keeps a test file in a process of its own. */
export const OWN_PROCESS_MARK = 'test-isolation: own-process';

/**
 * What in a test file's source keeps it alone, and why: each changes or reads something
 * every file in the process shares.
 * @type {ReadonlyArray<readonly [RegExp, string]>}
 */
const HAZARDS = [
  // Mocked setTimeout/Date replace the globals for the whole process: another file's
  // leftover timers (a closing service, a throttle window) would run on the mocked clock.
  [/\bmock\.timers\b/, 'mock timers'],
  // node:test's global `mock` tracker is the process's; its mocks live until restored.
  [/^import [^;]*\bmock\b[^;]*from 'node:test'/m, "node:test's global mock"],
  // A mocked method of a process-wide object (t.mock.method(performance, 'now'), …) is
  // seen by every file's code until its test ends: a frozen clock, a silenced console.
  [/\bmock\.method\(\s*(performance|Date|globalThis|process|console|Math|JSON)\b/, 'mocked process global'],
  // A listener on the process sees (and may swallow) another file's errors and warnings.
  [/\bprocess\.(on|once|addListener|prependListener|prependOnceListener|removeAllListeners|removeListener|off)\(/, 'process listeners'],
  [/\bprocess\.env(\.\w+|\[[^\]]+\])\s*=[^=]|\bdelete process\.env\b|Object\.assign\(\s*process\.env\b|\bprocess\.env\s*=[^=]/, 'environment edits'],
  [/\bprocess\.(umask|chdir|exit|exitCode|setMaxListeners)\b/, 'process-wide settings or exit'],
  // V8 flags (--expose-gc) and memory readings: the heap holds the other files' garbage too.
  [/setFlagsFromString|expose-gc|\bgc\(\)|memoryUsage|getHeapStatistics/, 'V8 flags or memory readings'],
  // The module cache is the process's: what another file imported shows there too
  // (unknown-fields checks that @fastify/ajv-compiler is never loaded; error-log builds a
  // plain fastify, which loads it).
  [/\brequire\.cache\b|createRequire\([^)]*\)\.cache\b/, 'module cache readings'],
];

/** Measured wall seconds by `<dir>/<name>` (without `.test.js`), from scripts/test-walls.tsv. */
function measuredWalls() {
  const text = readFileSync(new URL('./test-walls.tsv', import.meta.url), 'utf8');
  const walls = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const [name, wall] = line.split('\t');
    walls.set(name, Number(wall));
  }
  return walls;
}

/**
 * Why the test file `source` (its TypeScript, e.g. `test/unit/x.test.ts`) must keep a
 * process of its own, or undefined when it may share one.
 * @param {string} source
 * @returns {string | undefined}
 */
export function ownProcessReason(source) {
  let text;
  try {
    text = readFileSync(source, 'utf8');
  } catch {
    return 'no TypeScript source found to vet';
  }
  const marked = new RegExp(`//\\s*${OWN_PROCESS_MARK}\\b(.*)`).exec(text);
  if (marked) return `marked: ${marked[1].trim() || 'no reason given'}`;
  for (const [pattern, why] of HAZARDS) if (pattern.test(text)) return why;
  return undefined;
}

/**
 * The plan for the compiled test files `compiled` (paths `ROOT/<dir>/<name>.test.js`,
 * sorted): the groups to write and the files that run alone, each with its estimated wall.
 * @param {readonly string[]} compiled
 * @returns {{ groups: { file: string, members: string[], estimateS: number }[],
 *             alone: { file: string, reason: string, estimateS: number }[] }}
 */
export function planGroups(compiled) {
  const walls = measuredWalls();
  const longest = new Set(LONGEST.map((name) => `${ROOT}/${name}.test.js`));
  const alone = [];
  /** @type {Map<string, { file: string, wall: number }[]>} the groupable files per directory */
  const byDir = new Map();
  for (const file of compiled) {
    const name = file.slice(ROOT.length + 1, -'.test.js'.length);
    const wall = walls.get(name) ?? DEFAULT_WALL_S;
    const reason = longest.has(file)
      ? 'LONGEST'
      : wall >= GROUPABLE_UNDER_S
        ? `${wall} s alone`
        : ownProcessReason(`test/${name}.test.ts`);
    if (reason !== undefined) alone.push({ file, reason, estimateS: wall });
    else {
      const dir = name.split('/')[0];
      byDir.set(dir, [...(byDir.get(dir) ?? []), { file, wall }]);
    }
  }
  const groups = [];
  for (const [dir, files] of byDir) {
    // First fit, longest first: each file into the first group it fits (budget and count).
    /** @type {{ members: string[], estimateS: number }[]} */
    const bins = [];
    for (const { file, wall } of [...files].sort((a, b) => b.wall - a.wall)) {
      let bin = bins.find((b) => b.members.length < GROUP_MAX_FILES && b.estimateS + wall <= GROUP_BUDGET_S);
      if (!bin) bins.push((bin = { members: [], estimateS: 0 }));
      bin.members.push(file);
      bin.estimateS = Math.round((bin.estimateS + wall) * 10) / 10;
    }
    let n = 0;
    for (const bin of bins) {
      if (bin.members.length === 1) alone.push({ file: bin.members[0], reason: 'alone in its group', estimateS: bin.estimateS });
      else groups.push({ file: `${ROOT}/${dir}/_group-${++n}.test.js`, members: bin.members.sort(), estimateS: bin.estimateS });
    }
  }
  return { groups, alone };
}

/**
 * The text of a group file: one `describe` per member, named after its source path,
 * importing the compiled member (in the same directory) inside it; a member that throws
 * as it is imported gets a test `<source path> (import)` in its suite that throws the
 * same error, so that the summary's `# fail` counts it (this file's header says why).
 * @param {{ members: readonly string[] }} group
 */
export function groupSource(group) {
  const lines = [
    '// Written by scripts/build-tests.mjs (scripts/test-plan.mjs says why): these test files in one process,',
    '// each under a suite named after its source; one that throws as it is imported fails a test of its own.',
    "import { describe, test } from 'node:test';",
  ];
  for (const member of group.members) {
    const base = member.slice(member.lastIndexOf('/') + 1);
    const source = `test/${member.slice(ROOT.length + 1, -'.js'.length)}.ts`;
    lines.push(`describe(${JSON.stringify(source)}, async () => {`
      + ` try { await import(${JSON.stringify(`./${base}`)}); }`
      + ` catch (err) { test(${JSON.stringify(`${source} (import)`)}, () => { throw err; }); } });`);
  }
  return lines.join('\n') + '\n';
}
