// `npm test`'s file list: the groups of small test files and the files kept alone
// (scripts/test-plan.mjs decides which, scripts/build-tests.mjs writes them and
// .test-build/test-plan.json), the longest-running first, one per line for the shell to
// hand to `node --test`.
//
// Why an order: `node --test --test-concurrency=6` starts the files in the order it is
// given them, and the run ends when its last file does. In path order the service/
// files — most of the longest (each spawns `pixiu serve` children and waits on their
// signals and exits) — started in the last fifth of the run, so the run's last minutes
// were a few long files alone on an otherwise idle machine. Longest first (the classic
// longest-processing-time rule) lets the many short files fill the cores around them.
//
// So: LONGEST (test-plan.mjs, measured walls of whole runs on the 2-core VM, 2026-12-06)
// in its order, then every other group and file by its estimated wall, longest first
// (scripts/test-walls.tsv: the members' walls summed for a group), ties in path order.
// A name in LONGEST that no longer exists is skipped; a new file runs among the rest
// with test-plan.mjs's DEFAULT_WALL_S until its wall is measured into the table.
import { readFileSync } from 'node:fs';
import { LONGEST, PLAN_FILE, ROOT } from './test-plan.mjs';

/** @type {{ groups: { file: string, estimateS: number }[], alone: { file: string, estimateS: number }[] }} */
const plan = JSON.parse(readFileSync(PLAN_FILE, 'utf8'));
const runs = [...plan.groups, ...plan.alone];
const present = new Set(runs.map((r) => r.file));
const first = LONGEST.map((name) => `${ROOT}/${name}.test.js`).filter((f) => present.has(f));
const firstSet = new Set(first);
const rest = runs
  .filter((r) => !firstSet.has(r.file))
  .sort((a, b) => b.estimateS - a.estimateS || (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
  .map((r) => r.file);
process.stdout.write([...first, ...rest].join('\n') + '\n');
