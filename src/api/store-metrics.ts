/**
 * The message store's metrics (src/store/, DESIGN.md §3): its group-commit batches, its
 * failed writes and the records it found undecodable, fed by the store's hooks
 * (store-options.ts `onBatch`, `onWriteFailure`, `onUnreadable`; wired in
 * src/service/store-start.ts). Part of the service's metrics (metrics.ts `store`), in its
 * registry.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

/** The store's metrics, in one registry. */
export class StoreMetrics {
  /**
   * Records written per group-commit batch of the store: new messages only. A put the
   * store answers with a message already stored under its `client_msg_id` (a 200
   * duplicate, a 409) writes nothing and is not counted; a batch of only those is not
   * observed, here nor in {@link batchDuration} (a contract tester's F4).
   */
  readonly batchSize: Histogram;

  /** Duration of one store batch write (with fsync when durable); batches that wrote nothing are not timed. */
  readonly batchDuration: Histogram;

  /**
   * Failed store writes (a full disk, an I/O error). Each takes its partition out of
   * writes until it has reopened its database (src/store/write-recovery.ts); `/readyz`
   * says 503 meanwhile.
   */
  readonly writeFailures: Counter;

  /**
   * Stored records found undecodable (src/store/unreadable.ts): each is delivered as an
   * `undeliverable` gap and logged at error. Counted once per record per process (at
   * its first read; a record read again after the store forgot it, past 1,024 others,
   * counts again).
   */
  readonly unreadableRecords: Counter;

  constructor(registry: Registry) {
    this.batchSize = new Histogram({
      name: 'pixiu_store_batch_size',
      help: 'Records written per store group-commit batch (new messages; puts found already stored write nothing and are not counted)',
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000],
      registers: [registry],
    });
    this.batchDuration = new Histogram({
      name: 'pixiu_store_batch_duration_seconds',
      help: 'Store batch write time in seconds, fsync included',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    });
    this.writeFailures = new Counter({
      name: 'pixiu_store_write_failures_total',
      help: 'Store writes that failed; the partition takes no writes until it has reopened its database',
      registers: [registry],
    });
    this.unreadableRecords = new Counter({
      name: 'pixiu_store_unreadable_records_total',
      help: 'Stored records whose bytes cannot be decoded (each delivered as an undeliverable gap), counted at their first read',
      registers: [registry],
    });
  }

  /** Records one store batch that wrote `written` records in `ms` milliseconds (the store's `onBatch` hook). */
  observeBatch(written: number, ms: number): void {
    this.batchSize.observe(written);
    this.batchDuration.observe(ms / 1000);
  }
}
