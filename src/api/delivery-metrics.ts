/**
 * The metrics of inbox delivery (DESIGN.md §5): the delivery sessions' reads of the
 * inbox, the ones that failed, the users whose delivery waits on them, the lag of live
 * messages, and the seqs devices were told they can no longer get (inbox `gap` frames,
 * docs/protocol.md "Why a gap"). Part of the service's metrics (metrics.ts `delivery`),
 * in its registry.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { FetchRead } from '../delivery/session.js';
import type { GapFrame } from '../delivery/frames.js';
import { GAP_REASONS, type GapReason } from '../delivery/message-view.js';
import { FETCH_READ_LABELS } from './metric-labels.js';

/** `reason` label sets of the gap counters, built once (as metric-labels.ts's). */
const GAP_LABELS = Object.fromEntries(GAP_REASONS.map((reason) => [reason, Object.freeze({ reason })])) as Readonly<Record<GapReason, { reason: GapReason }>>;

/** Delivery's metrics, in one registry. */
export class DeliveryMetrics {
  /**
   * Inbox reads by delivery sessions (DESIGN.md §5 fetches). A live message to a
   * caught-up local connection needs none; logins, heartbeats, remote notifies and
   * connections catching up do.
   */
  readonly fetches: Counter;

  /**
   * Delivery fetches that failed, by the read that failed (src/delivery/session.ts
   * `FetchRead`): `inbox`, the inbox page in Redis; `records`, the messages' content
   * (the node owning their partition down or unreachable, the local store, or the
   * owner lookup in Redis). Each is retried (DESIGN.md §9); the user's delivery waits
   * meanwhile ({@link stalledUsers}).
   */
  readonly fetchFailures: Counter;

  /**
   * Users connected here whose delivery is stalled now: their session's last fetch
   * failed and none has succeeded since. Nothing more reaches their devices (not even
   * `welcome` on a new connection) until a fetch succeeds.
   */
  readonly stalledUsers: Gauge;

  /**
   * Time from a message's `ts` (when the store accepted it: the ingesting node's clock,
   * Redis's for a room message) to this node writing its `msg` frame on a connection,
   * seconds, for live deliveries only (src/delivery/effects.ts, the `live` mark of a
   * `send`): the first send on that connection of a message appended after its
   * `welcome` (or `reset`). Not timed: catch-up (the backlog a connection is sent after
   * its `welcome`, whose lag is how long the device was away), redeliveries, and gaps.
   * Across nodes it includes the difference of their clocks.
   */
  readonly lag: Histogram;

  /**
   * Seqs devices were told they can no longer get, by `reason` (`trimmed`, `expired`,
   * `undeliverable`): `to − from + 1` of every inbox `gap` frame written that is not
   * marked `redelivered` — what a client counts as missing (docs/protocol.md, `gap`:
   * nothing of a marked gap, which holds seqs the device was sent or had before). An
   * unmarked gap always begins past what the server knows the device had (its
   * `last_seq`, what this connection was sent, what a `reset` showed it had), so this
   * is the client's clipped count, except where the device processed more than the
   * server could know (it resumed from its stored cursor without `last_seq`, its last
   * acks not stored: case 4 of "Where delivery starts"). Counted per connection: two
   * devices told of the same seqs count them twice, as does one that is told again
   * on reconnecting with the same `last_seq`.
   */
  readonly gapSeqs: Counter;

  /**
   * Inbox `gap` frames written that are not marked `redelivered` (those counted in
   * {@link gapSeqs}), by `reason`. A run of missing seqs may take several frames (a
   * gap spans at most one inbox read: docs/protocol.md "Why a gap").
   */
  readonly gaps: Counter;

  constructor(registry: Registry) {
    this.fetches = new Counter({
      name: 'pixiu_delivery_fetches_total',
      help: 'Inbox reads by delivery sessions (logins, heartbeats, catch-up, remote notifies)',
      registers: [registry],
    });
    this.fetchFailures = new Counter({
      name: 'pixiu_delivery_fetch_failures_total',
      help: 'Delivery fetches that failed and will be retried, by the read that failed (inbox: Redis; records: message content, e.g. its owning node down)',
      labelNames: ['read'] as const,
      registers: [registry],
    });
    this.stalledUsers = new Gauge({
      name: 'pixiu_delivery_stalled_users',
      help: 'Users connected to this node whose last delivery fetch failed (their delivery waits for a retry to succeed)',
      registers: [registry],
    });
    this.lag = new Histogram({
      name: 'pixiu_delivery_lag_seconds',
      help: 'Seconds from a message\'s ingest (its ts) to its msg frame being written to a device connected when it was appended (first send; not catch-up, not redeliveries)',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    });
    this.gapSeqs = new Counter({
      name: 'pixiu_delivery_gap_seqs_total',
      help: 'Inbox seqs devices were told they can no longer get, by reason (trimmed: inbox cap or retention; expired: content ttl; undeliverable): seqs of gap frames not marked redelivered',
      labelNames: ['reason'] as const,
      registers: [registry],
    });
    this.gaps = new Counter({
      name: 'pixiu_delivery_gaps_total',
      help: 'Inbox gap frames not marked redelivered written to devices, by reason (those of pixiu_delivery_gap_seqs_total)',
      labelNames: ['reason'] as const,
      registers: [registry],
    });
    for (const labels of Object.values(FETCH_READ_LABELS)) this.fetchFailures.inc(labels, 0);
    for (const labels of Object.values(GAP_LABELS)) {
      this.gapSeqs.inc(labels, 0);
      this.gaps.inc(labels, 0);
    }
  }

  /** Counts one failed delivery fetch by the read that failed. */
  countFetchFailure(read: FetchRead): void {
    this.fetchFailures.inc(FETCH_READ_LABELS[read]);
  }

  /**
   * Records one live delivery in {@link lag}: one observe, nothing else per
   * frame. A `ts` ahead of this node's clock (another node's clock ahead) counts as 0.
   * @param tsMs the message's `ts`, ms since the epoch
   */
  observeLag(tsMs: number): void {
    this.lag.observe(Math.max(0, Date.now() - tsMs) / 1000);
  }

  /**
   * Counts one inbox `gap` frame written on a connection, as it went out (its `to`
   * final): in {@link gaps} and its seqs in {@link gapSeqs}, unless it is marked
   * `redelivered` (no news to the device).
   */
  countGap(gap: GapFrame): void {
    if (gap.redelivered === true) return;
    const labels = GAP_LABELS[gap.reason];
    this.gaps.inc(labels);
    this.gapSeqs.inc(labels, gap.to - gap.from + 1);
  }
}
