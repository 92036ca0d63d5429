/**
 * How a message store's partitions open (message-store.ts `MessageStore.open`): their
 * count and base checked, and with the options they share (the store's write fence, one
 * pool of write slots), partition 0 alone first, whose LevelDB lock stands for the
 * store's, then the others together. When any fails, those opened are closed again and
 * one error names every folder that failed.
 */
import path from 'node:path';
import { StartupError } from '../errors.js';
import { Partition } from './partition.js';
import type { MessageStoreOptions } from './store-options.js';
import type { WriteFence } from './write-fence.js';
import { WriteSlots, writeSlotCount } from './write-slots.js';

/**
 * Checks a store's partition count P and base B (DESIGN.md §3, §9): P a power of two
 * in 1..256, B an integer from 0 with B+P at most 256.
 * @throws StartupError naming the one that is not
 */
export function checkPartitionRange(count: number, base: number): void {
  if (!Number.isInteger(count) || count < 1 || count > 256 || (count & (count - 1)) !== 0) {
    throw new StartupError(`store partitions must be a power of two from 1 to 256, got ${count}`);
  }
  if (!Number.isInteger(base) || base < 0 || base + count > 256) {
    throw new StartupError(`store partition base must leave room for ${count} partitions below 256, got ${base}`);
  }
}

/**
 * Opens (creating if missing) the store's partitions: folder `<dir>/<p>` holds MsgID
 * partition `base + p`, for p in 0..count-1 ({@link checkPartitionRange} passed).
 * @param fence the store's write fence, checked by each partition per batch
 * @param monotonic the store's clock that never steps, ms (the sweeps' bound)
 * @returns the partitions, by p
 * @throws StartupError when a partition folder is locked by another process or cannot
 *   be read: the message names each such folder (partition 0's alone when it is the
 *   one: the others are not opened then); the partitions opened are closed again
 */
export async function openPartitions(opts: MessageStoreOptions, fence: WriteFence, monotonic: () => number): Promise<Partition[]> {
  const base = opts.partitionBase ?? 0;
  const partitionOptions = {
    sync: opts.sync, now: opts.now ?? Date.now, onBatch: opts.onBatch, onWriteFailure: opts.onWriteFailure,
    monotonic, fence, redisClock: opts.redisClock,
    // Fewer writes at once than the libuv pool has threads: one is left to reads (write-slots.ts).
    slots: new WriteSlots(writeSlotCount()),
    writeTimeoutMs: opts.writeTimeoutMs,
    logger: opts.logger,
  };
  const openAt = (p: number): Promise<Partition> => Partition.open(path.join(opts.dir, String(p)), base + p, partitionOptions);
  // Partition 0 alone first: its LevelDB LOCK is the store's. Of two starts on one
  // folder at once, one holds it and the other fails here, opening no other partition;
  // opened all at once, each could win some partitions and both failed (with a shared
  // Redis nothing locks the data dir before this). docs/decisions.md, "Partition 0's lock is the store's".
  const opened: PromiseSettledResult<Partition>[] = await Promise.allSettled([openAt(0)]);
  if (opened[0]?.status === 'fulfilled') opened.push(...await Promise.allSettled(Array.from({ length: opts.partitions - 1 }, (_, p) => openAt(p + 1))));
  const partitions = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failures = opened.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (failures.length > 0) {
    await Promise.allSettled(partitions.map((p) => p.close()));
    const first = failures[0];
    if (failures.length === 1 && first instanceof StartupError) throw first;
    const lines = failures.map((f) => (f instanceof Error ? f.message : String(f)));
    throw new StartupError(`the message store cannot open:\n  ${lines.join('\n  ')}`, { cause: first });
  }
  return partitions;
}
