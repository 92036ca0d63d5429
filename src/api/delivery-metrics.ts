/**
 * The metrics of inbox delivery (DESIGN.md §5): the delivery sessions' reads of the
 * inbox, the ones that failed, the users whose delivery waits on them, and the lag of
 * live messages. Part of the service's metrics (metrics.ts `delivery`), in its registry.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { FetchRead } from '../delivery/session.js';
import { FETCH_READ_LABELS } from './metric-labels.js';

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
    for (const labels of Object.values(FETCH_READ_LABELS)) this.fetchFailures.inc(labels, 0);
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
}
