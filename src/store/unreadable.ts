/**
 * A stored record that cannot be decoded (docs/decisions.md "Unreadable records"): its
 * bytes are not a record this release reads — not JSON, JSON of another shape, or a
 * `kind` it does not know. That is permanent (the bytes on disk will not change by
 * reading them again), unlike a LevelDB I/O error, which may pass and stays an
 * UNAVAILABLE that readers retry (DESIGN.md §5, §11).
 *
 * Readers ({@link RecordReader}) answer it in the record's place, so that one bad
 * record costs its own seq and nothing else: delivery sends a `gap` of that seq with
 * reason `undeliverable`, history lists it in `gaps` alike, `GET /v1/messages/{id}`
 * answers 404 (docs/api.md). The records route between nodes carries it as
 * `{id, unreadable: true}` (src/cluster/records-route.ts), so a node reading another's
 * record shows the same gap.
 *
 * It is never cached (src/store/record-cache.ts, src/cluster/store-router.ts): a record
 * repaired on disk reads as itself at the next read.
 */
import type { Logger } from '../logger.js';
import { SeenKeys } from '../seen-keys.js';
import type { StoredMessage } from './record.js';

/** A record whose stored bytes cannot be decoded, in its place in a read's answer. */
export interface UnreadableRecord {
  /** Its MsgID (16 hex digits). */
  readonly id: string;
  /** Always true: what tells it from a record, in memory and on the records route. */
  readonly unreadable: true;
}

/** What a read answers per id besides null: the record, or the mark that it cannot be decoded. */
export type ReadRecord = StoredMessage | UnreadableRecord;

/** The mark of the record `id` that cannot be decoded (frozen, as records read are). */
export function unreadableRecord(id: string): UnreadableRecord {
  return Object.freeze({ id, unreadable: true });
}

/** True when a read's answer for an id is the {@link UnreadableRecord} mark. */
export function isUnreadable(record: ReadRecord | null | undefined): record is UnreadableRecord {
  return record !== null && record !== undefined && (record as Partial<UnreadableRecord>).unreadable === true;
}

/** How many MsgIDs {@link UnreadableLog} remembers having logged. */
export const UNREADABLE_LOGGED_MAX = 1024;

/**
 * Logs each unreadable record once, at error, with its MsgID and partition: a
 * record read again and again (every redelivery, every fetch and history page that
 * holds it, every device) is one line, not one per read. Remembers the last
 * {@link UNREADABLE_LOGGED_MAX} ids logged; one forgotten is logged again when read.
 */
export class UnreadableLog {
  readonly #logger: Logger | undefined;
  /** Ids logged. */
  readonly #logged = new SeenKeys(UNREADABLE_LOGGED_MAX);
  readonly #onReported: (() => void) | undefined;

  /** @param onReported called with each line logged (a metric's count) */
  constructor(logger: Logger | undefined, onReported?: () => void) {
    this.#logger = logger;
    this.#onReported = onReported;
  }

  /**
   * Notes that record `id` of partition `partition` (its MsgID partition byte), read
   * from `source` (a partition's folder, or the node that sent it), cannot be decoded;
   * logs it unless it was logged before.
   * @param err why (the decode's error: its cause is the JSON error, when the bytes are
   *   no JSON; none when the JSON is of another shape)
   */
  report(id: string, partition: number, source: string, err: unknown): void {
    if (!this.#logged.add(id)) return;
    const reason = err instanceof Error && err.cause instanceof Error ? err.cause.message : 'JSON that is no record of this release (another shape, or an unknown kind)';
    this.#logger?.error({ msgId: id, partition, source, reason },
      'stored message cannot be decoded: it is delivered as a gap (reason undeliverable)');
    this.#onReported?.();
  }
}
