/**
 * The time floor of the MsgID counters (DESIGN.md §2: a MsgID is minted once; §3: the
 * counter survives restarts): where a serving node (`pixiu serve`, src/service/service.ts)
 * starts minting in each partition of its store, whatever the store recovered.
 *
 * Why: a data dir restored from a backup recovers the counters it had when the backup
 * was taken, and the record of minted counters in Redis (src/cluster/minted-counters.ts)
 * cannot tell when Redis is restored from the same point (the embedded Redis keeps its
 * AOF inside the data dir): without a floor the node would mint again, for new
 * messages, the ids it answered producers with after the backup (`GET /v1/messages/{id}`
 * would read another message; a client matching messages by id after a `reset` would
 * drop a new one). The clock does not go back with a restore.
 */
import type { Logger } from '../logger.js';
import { MAX_COUNTER } from '../ids/msg-id.js';

/**
 * K, counters per millisecond of the clock: a node starting at time t (ms since the
 * epoch) mints in each partition from at least `t × K` on.
 *
 * The guarantee: a run that started at t₀ with its counters at their floor `t₀ × K`
 * and minted N ids in a partition until a later run starts at t₁ left them at most at
 * `t₀ × K + N`, and that later run's first id there is `t₁ × K + 1`: past them unless
 * N > (t₁ − t₀) × K — more than K ids per ms in that partition on average since its
 * start, some 16,000 messages a second in one partition for its whole life, far above
 * what a node takes. So a restored node's new ids start past every id minted by any
 * earlier run, lost or not. Weaker where a run's counters started ahead of its floor:
 * moved past another store's by RESUME_MARGIN (src/cluster/minted-counters.ts: 2^24,
 * about 17 minutes of floor at K = 16), or left above it by a clock set back (a
 * counter never moves back, so such a run mints from where it was, and a later floor
 * may not be past it yet).
 *
 * The cost: the counters start near `now × 16` (about 2.9 · 10^13 in 2027, a tenth of
 * the 2^48 counters), and `MAX_COUNTER / 16` ms after the epoch is about 557 years:
 * floors reach the top of the 48 bits around the year 2527 ({@link TIME_FLOOR_HEADROOM}
 * stops them short of it).
 */
export const TIME_FLOOR_PER_MS = 16;

/**
 * Counters a floor always leaves free below {@link MAX_COUNTER} (2^40, about 1.1 · 10^12
 * ids, two years at 16,000 a second): a floor above `MAX_COUNTER − 2^40` — a clock
 * reading after about the year 2525, most likely wrong — is not applied (and logged),
 * since a counter never moves back and a partition at MAX_COUNTER mints nothing more.
 */
export const TIME_FLOOR_HEADROOM = 2 ** 40;

/**
 * The floor of the counters at clock `nowMs`: `floor(nowMs) × K` ({@link TIME_FLOOR_PER_MS}).
 * @param nowMs ms since the epoch (Date.now)
 * @returns the floor, 0 for a clock at or before the epoch, or undefined when it would
 *   leave less than {@link TIME_FLOOR_HEADROOM} counters (or the clock is not a number)
 */
export function timeFloor(nowMs: number): number | undefined {
  if (!Number.isFinite(nowMs)) return undefined;
  const floor = Math.max(0, Math.floor(nowMs)) * TIME_FLOOR_PER_MS;
  return floor > MAX_COUNTER - TIME_FLOOR_HEADROOM ? undefined : floor;
}

/**
 * A counter under the floor rule: the larger of the two, never lower than `counter`.
 * @param counter the counter recovered (or moved past what Redis recorded as minted)
 * @param floor {@link timeFloor}'s answer; undefined leaves the counter as it is
 */
export function flooredCounter(counter: number, floor: number | undefined): number {
  return floor === undefined ? counter : Math.max(counter, floor);
}

/** The store as {@link applyTimeFloor} raises its counters (MessageStore). */
export interface FlooredStore {
  /** Partition count P. */
  readonly partitions: number;
  /**
   * Raises every partition's counter to `floor` where it is below (never lowers one).
   * @returns how many partitions were raised
   */
  raiseCounters(floor: number): number;
}

/**
 * Applies the time floor to the store's counters before a serving node mints its first
 * id (after the catch-up past what Redis recorded: the larger of all wins). Logged once,
 * at info: the floor, and how many partitions it raised; at warn when the clock reads
 * too far ahead for a floor ({@link TIME_FLOOR_HEADROOM}).
 * @param nowMs the clock, ms since the epoch
 * @returns the floor applied, undefined when none was
 */
export function applyTimeFloor(store: FlooredStore, nowMs: number, logger: Logger): number | undefined {
  const floor = timeFloor(nowMs);
  if (floor === undefined) {
    logger.warn({ clock: nowMs }, 'the clock reads too far ahead for a message-id time floor (past about the year 2525): not applied, '
      + 'the counters go on from the store\'s (a data dir restored from a backup may then mint ids it minted before)');
    return undefined;
  }
  const raised = store.raiseCounters(floor);
  logger.info({ floor, perMs: TIME_FLOOR_PER_MS, clock: new Date(nowMs).toISOString(), raised, partitions: store.partitions },
    'message-id counters start at least at the time floor (clock ms × 16), so a data dir restored from a backup never mints an id it minted before');
  return floor;
}
