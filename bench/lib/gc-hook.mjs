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
 * Loaded with `--import`; plain JavaScript, so that the server runs without tsx, as
 * `npm start` runs it. The process must run with `--expose-gc` (the bench gives it in
 * NODE_OPTIONS). Nothing of it is in src/: the service exposes no new hook.
 */
let collections = 0;

process.on('SIGUSR2', () => {
  const gc = globalThis.gc;
  if (gc) {
    gc();
    gc();
  }
  collections += 1;
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
  process.stdout.write(`${JSON.stringify({ msg: 'bench gc done', n: collections, exposed: gc !== undefined, rss, heapUsed, heapTotal, external })}\n`);
});
