/**
 * A bench-only preload for `pixiu serve` under bench:e2e (BENCH_E2E_ALLOC_PROF=<file>):
 * records where the server allocates, with V8's sampling heap profiler (one sample per
 * 8 KiB allocated on average), counting the objects later collected by scavenges and
 * full GCs too — what a garbage collection pause is made of, not what stays. Writes a
 * `.heapprofile` (Chrome DevTools, Memory tab, opens it) to the file named by
 * BENCH_ALLOC_PROF_FILE when the process exits (the bench stops the server gracefully).
 *
 * Loaded with `--import`; plain JavaScript, so that the server runs without tsx. In an
 * in-process inspector session the profiler's answers come synchronously, so writing
 * it from an `exit` listener works. Nothing of it is in src/.
 */
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';

const file = process.env.BENCH_ALLOC_PROF_FILE;
if (file) {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true,
  });
  process.on('exit', () => {
    session.post('HeapProfiler.stopSampling', (err, result) => {
      if (err === null && result) writeFileSync(file, JSON.stringify(result.profile));
    });
  });
}
