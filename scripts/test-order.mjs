// `npm test`'s file list: every compiled test file (.test-build/test/<dir>/<name>.test.js,
// written by scripts/build-tests.mjs), the longest-running first, then the rest in
// path order, one per line for the shell to hand to `node --test`.
//
// Why an order: `node --test --test-concurrency=6` starts the files in the order it is
// given them, and the run ends when its last file does. In path order the service/
// files — most of the longest (each spawns `pixiu serve` children and waits on their
// signals and exits) — started in the last fifth of the run, so the run's last minutes
// were a few long files alone on an otherwise idle machine. Longest first (the classic
// longest-processing-time rule) lets the many short files fill the cores around them.
//
// LONGEST is from measured wall times (a per-file accounting of whole runs on the 2-core
// VM, 2026-12-06, bench/README.md has none of it: it is the suite's, not Pixiu's);
// a name here that no longer exists is skipped, and a new long file just runs in path
// order until it is added.
import { readdirSync } from 'node:fs';
import path from 'node:path';

const ROOT = '.test-build/test';

/** The longest files, longest first (wall seconds of one run at load ~6 in the comments). */
const LONGEST = [
  'broadcast/live-latency', // 116
  'service/cli-connect', // 106
  'service/cli', // 100
  'service/shutdown', // 86
  'gateway/backpressure', // 83
  'service/layout-format', // 81
  'service/crash', // 80
  'service/embedded-redis', // 80
  'service/cli-serve', // 68
  'cluster/prefix-split', // 65
  'api/batch-order-after-failure', // 57
  'service/restore-backup', // 50
  'service/redis-url', // 48
  'service/cli-inspect', // 43
  'gateway/delivery', // 42
  'api/bad-input', // 42
].map((name) => `${ROOT}/${name}.test.js`);

const all = readdirSync(ROOT, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .flatMap((d) => readdirSync(path.join(ROOT, d.name)).filter((f) => f.endsWith('.test.js')).map((f) => `${ROOT}/${d.name}/${f}`))
  .sort();
const present = new Set(all);
const first = LONGEST.filter((f) => present.has(f));
const firstSet = new Set(first);
process.stdout.write([...first, ...all.filter((f) => !firstSet.has(f))].join('\n') + '\n');
