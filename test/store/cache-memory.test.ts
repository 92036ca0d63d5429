/**
 * The read cache's size is the memory it takes (PIXIU_STORE_CACHE_BYTES,
 * docs/decisions.md). A remembered (written) record is kept as a copy of its stored
 * bytes (src/store/record-cache.ts `setWritten`): kept as a slice of its shared 64 KiB
 * arena slab, each cached record kept its whole slab alive, and as ingest remembers
 * only records with an online recipient, with a small share of puts remembered every
 * cached record pinned a slab of its own (24.8 MiB for a 256 KiB cache).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { openStore, tempDir } from './fixtures/store-harness.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

function arrayBuffers(): number {
  gc(); gc();
  return process.memoryUsage().arrayBuffers;
}

test('a cache of 256 KiB of remembered records holds about that much memory, not a slab per record', { timeout: 120_000 }, async (t) => {
  const dir = await tempDir(t);
  const cacheBytes = 256 * 1024;
  const store = await openStore(t, dir, { partitions: 1, sync: false, cacheBytes });
  const before = arrayBuffers();
  const EVERY = 200;
  const TOTAL = 100_000;
  let remembered = 0;
  for (let start = 0; start < TOTAL; start += 2000) {
    const puts = await Promise.all(Array.from({ length: 2000 }, (_, i) =>
      store.put({ kind: 1, type: 'chat.text', from: 'svc', data: { text: `message ${start + i} ${'x'.repeat(200)}` }, to: [`user-${start + i}`] })));
    puts.forEach((p, i) => {
      // One put in EVERY has a recipient online: ingest caches it (MessageStore.remember).
      if ((start + i) % EVERY === 0) { store.remember(p); remembered++; }
    });
  }
  const held = arrayBuffers() - before;
  t.diagnostic(`remembered ${remembered} records; array buffers held after GC: ${(held / 1024 / 1024).toFixed(1)} MiB for a ${cacheBytes / 1024} KiB cache`);
  assert.ok(held < 8 * cacheBytes, `the cache of ${cacheBytes / 1024} KiB keeps ${(held / 1024 / 1024).toFixed(1)} MiB of buffers alive`);
});
