/**
 * A bench-only preload for a server child of bench:e2e (`pixiu serve`, and the bare
 * `ws` relay), for the memory case: on SIGUSR2 it runs two full garbage collections and
 * prints one JSON line on stdout,
 * `{"msg": "bench gc done", "n", "exposed", "rss", "heapUsed", "heapTotal", "external"}`
 * (bytes, from `process.memoryUsage()` right after the collections), so the bench reads
 * memory after a GC settle rather than with garbage in the heap. For Pixiu the bench
 * reads its own /metrics after this line; the bare relay has no /metrics, so the line
 * is its figure.
 *
 * With BENCH_HEAP_SNAPSHOT_DIR set, each collection also writes a heap snapshot into
 * that dir (`v8.writeHeapSnapshot`, which collects once more first) and the line names
 * it as `snapshot` (bench/lib/idle-memory.ts diffs two of them). Writing one takes
 * seconds and grows the RSS by about the snapshot's size for the rest of the process:
 * a run that writes snapshots measures no RSS.
 *
 * Loaded with `--import`; plain JavaScript, so that the server runs without tsx, as
 * `npm start` runs it. The process must run with `--expose-gc` (the bench gives it in
 * NODE_OPTIONS). Nothing of it is in src/: the service exposes no new hook.
 */
import path from 'node:path';
import { writeHeapSnapshot } from 'node:v8';

const snapshotDir = process.env.BENCH_HEAP_SNAPSHOT_DIR;
let collections = 0;

process.on('SIGUSR2', () => {
  const gc = globalThis.gc;
  if (gc) {
    gc();
    gc();
  }
  collections += 1;
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
  const snapshot = snapshotDir ? writeHeapSnapshot(path.join(snapshotDir, `gc-${process.pid}-${collections}.heapsnapshot`)) : undefined;
  process.stdout.write(`${JSON.stringify({ msg: 'bench gc done', n: collections, exposed: gc !== undefined, rss, heapUsed, heapTotal, external, snapshot })}\n`);
});
