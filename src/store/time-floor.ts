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
 *
 * The rule: `floor = max(0, floor(now − TIME_FLOOR_EPOCH_MS)) × K` ({@link timeFloor}),
 * K = {@link TIME_FLOOR_PER_MS} counters per ms since 2025-01-01T00:00:00Z. It holds
 * while each partition mints fewer than K ids per ms on average since its start, and
 * its counter started the run at its floor; where a counter is above the floor at a
 * start, {@link applyTimeFloor} says so at warn, with how far ahead in time it is.
 */
import type { Logger } from '../logger.js';
import { MAX_COUNTER } from '../ids/msg-id.js';

/**
 * The floor's epoch, ms since 1970 (Date.now's): 2025-01-01T00:00:00Z, before any data
 * dir this rule runs on was written. A clock before it gives the floor 0.
 */
export const TIME_FLOOR_EPOCH_MS = Date.UTC(2025, 0, 1);

/**
 * K, counters per millisecond since {@link TIME_FLOOR_EPOCH_MS}: a node starting at time
 * t mints in each partition from at least `(t − epoch) × K` on.
 *
 * The guarantee: a run that started at t₀ with a counter at its floor `f(t₀)` and
 * minted N ids in a partition until a later run starts at t₁ left it at most at
 * `f(t₀) + N`, and that later run's first id there is `f(t₁) + 1`: past them unless
 * N > (t₁ − t₀) × K — more than K ids per ms in that partition on average since its
 * start, 64,000 messages a second in one partition for its whole life. Batch ingest
 * measured 22–39 k messages a second for a whole node (bench/README.md), which with
 * `PIXIU_PARTITIONS=1` (or one hot recipient or room) is one partition: under K, with
 * margin. So a restored node's new ids start past every id minted by any earlier
 * run, lost or not. Weaker where a run's counter started ahead of its floor — its
 * previous run minted faster than K a ms since its start, it was moved past another
 * store's by RESUME_MARGIN (src/cluster/minted-counters.ts: 2^24, about 4.4 minutes of
 * floor), or the clock was set back (a counter never moves back) — for as long as the
 * counter stays ahead: {@link applyTimeFloor} logs that lead at warn.
 *
 * The cost: the counters start near `(now − epoch) × 64` (about 4 · 10^12 in 2027, a
 * seventieth of the 2^48 counters), and `MAX_COUNTER / 64` ms is about 139 years:
 * floors reach the top of the 48 bits in 2164 ({@link TIME_FLOOR_HEADROOM} stops them
 * short of it, in late 2163).
 */
export const TIME_FLOOR_PER_MS = 64;

/**
 * Counters a floor always leaves free below {@link MAX_COUNTER} (2^40, about 1.1 · 10^12
 * ids, some 200 days at 64,000 a second): a floor above `MAX_COUNTER − 2^40` — a clock
 * reading after October 2163, most likely wrong — is not applied (and logged), since
 * a counter never moves back and a partition at MAX_COUNTER mints nothing more.
 */
export const TIME_FLOOR_HEADROOM = 2 ** 40;

/**
 * The floor of the counters at clock `nowMs`: `max(0, floor(nowMs − epoch)) × K`
 * ({@link TIME_FLOOR_EPOCH_MS}, {@link TIME_FLOOR_PER_MS}).
 * @param nowMs ms since 1970 (Date.now)
 * @returns the floor, 0 for a clock at or before the epoch, or undefined when it would
 *   leave less than {@link TIME_FLOOR_HEADROOM} counters (or the clock is not a number)
 */
export function timeFloor(nowMs: number): number | undefined {
  if (!Number.isFinite(nowMs)) return undefined;
  const floor = Math.max(0, Math.floor(nowMs - TIME_FLOOR_EPOCH_MS)) * TIME_FLOOR_PER_MS;
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

/** The store as {@link applyTimeFloor} raises and reads its counters (MessageStore). */
export interface FlooredStore {
  /** Partition count P. */
  readonly partitions: number;
  /** First MsgID partition byte B: partition i is byte B+i. */
  readonly partitionBase: number;
  /** Per partition: the counter in memory, the next id counts on from it (at or above the written one). */
  readonly assignedCounters: readonly number[];
  /**
   * Raises every partition's counter to `floor` where it is below (never lowers one).
   * @returns how many partitions were raised
   * @throws RangeError when `floor` is not a counter (an integer 0..2^48-1)
   */
  raiseCounters(floor: number): number;
}

/**
 * How far the store's counters are ahead of `floor`, in time: the largest lead, ms of
 * floor ((counter − floor) / K, rounded up), and the partitions (MsgID partition bytes)
 * whose counter is above it; undefined when none is.
 */
function leadOverFloor(store: FlooredStore, floor: number): { leadMs: number; partitions: number[] } | undefined {
  const ahead = store.assignedCounters.flatMap((c, i) => (c > floor ? [{ partition: store.partitionBase + i, c }] : []));
  if (ahead.length === 0) return undefined;
  const top = Math.max(...ahead.map((a) => a.c));
  return { leadMs: Math.ceil((top - floor) / TIME_FLOOR_PER_MS), partitions: ahead.map((a) => a.partition) };
}

/**
 * Applies the time floor to the store's counters before a serving node mints its first
 * id (after the catch-up past what Redis recorded: the larger of all wins). Logged once,
 * at info: the floor, and how many partitions it raised. At warn, one line more: when
 * a partition's counter is above the floor (the guarantee then waits for the clock to
 * catch up: `aheadSeconds`, the largest lead, the partitions, and `floorPassesAt`, when
 * the floor passes the highest counter if nothing more is minted), when the clock is not
 * a number, or when it reads too far ahead for a floor ({@link TIME_FLOOR_HEADROOM}).
 * @param nowMs the clock, ms since 1970
 * @returns the floor applied, undefined when none was
 * @throws RangeError from the store when the floor is not a counter (cannot happen for
 *   timeFloor's answers)
 */
export function applyTimeFloor(store: FlooredStore, nowMs: number, logger: Logger): number | undefined {
  const floor = timeFloor(nowMs);
  if (floor === undefined) {
    const unusable = !Number.isFinite(nowMs);
    logger.warn({ clock: unusable ? String(nowMs) : nowMs }, `${unusable
      ? 'the clock reads no number (Date.now() is not finite): no message-id time floor applied'
      : 'the clock reads too far ahead for a message-id time floor (past October 2163): not applied'}; `
      + 'the counters go on from the store\'s (a data dir restored from a backup may then mint ids it minted before)');
    return undefined;
  }
  const raised = store.raiseCounters(floor);
  logger.info({ floor, perMs: TIME_FLOOR_PER_MS, since: new Date(TIME_FLOOR_EPOCH_MS).toISOString(), clock: new Date(nowMs).toISOString(), raised, partitions: store.partitions },
    'message-id counters start at least at the time floor (64 per ms since 2025-01-01): past every id of an earlier run that started at its floor and minted fewer than 64 a ms in a partition');
  const lead = leadOverFloor(store, floor);
  if (lead !== undefined) {
    logger.warn({ aheadSeconds: Math.ceil(lead.leadMs / 1000), partitions: lead.partitions, floorPassesAt: new Date(nowMs + lead.leadMs).toISOString() },
      'message-id counters are ahead of the time floor (an earlier run minted faster than 64 ids a ms since its start, moved past another store\'s ids, or the clock was set back): '
      + 'a data dir restored from a backup and started less than aheadSeconds after this node\'s last id may mint again ids minted after that backup; wait that long before starting a restored copy');
  }
  return floor;
}
