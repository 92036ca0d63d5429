/**
 * The metrics of the node's budget for its WebSockets' send buffers
 * (src/gateway/buffer-budget.ts, `PIXIU_SOCKET_BUFFER_BUDGET_BYTES`): what they hold
 * unsent, the budget, the pauses it caused and the connections it closed. Part of the
 * service's metrics (metrics.ts `wsBuffers`), in its registry.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** What the gauges read when scraped ({@link WsBufferMetrics.watch}). */
export interface HeldBytes {
  readonly heldBytes: number;
  readonly budgetBytes: number;
}

/** The send buffers' metrics, in one registry. */
export class WsBufferMetrics {
  #budget: HeldBytes = { heldBytes: 0, budgetBytes: 0 };

  /**
   * Bytes written to the node's WebSockets and not yet taken by the kernel, all
   * connections together, as each last measured them (after a write, at a write's
   * completion): what `PIXIU_SOCKET_BUFFER_BUDGET_BYTES` bounds.
   */
  readonly bufferedBytes: Gauge;

  /** The budget in force, bytes (the setting, or its default derived at start); 0: none. */
  readonly budgetBytes: Gauge;

  /**
   * Connections paused because the node's send buffers were at their budget (not their
   * own high-water mark): by a write that left one holding more than the budget's floor,
   * or a page cut at that floor (ws-connection.ts `hold`). Pauses at a connection's own
   * high-water mark are counted nowhere.
   */
  readonly budgetPauses: Counter;

  /**
   * Connections closed 4009 because a live broadcast or channel publication came for
   * them while the node was at its budget and they were paused with more than its floor
   * queued (buffer-budget.ts `refusesLive`); also in `pixiu_ws_closes_total{code="4009"}`.
   */
  readonly budgetCloses: Counter;

  constructor(registry: Registry) {
    const read = (): HeldBytes => this.#budget;
    this.bufferedBytes = new Gauge({
      name: 'pixiu_ws_buffered_bytes',
      help: 'Bytes written to this node\'s WebSockets and not yet taken by the kernel, all connections together',
      registers: [registry],
      collect(): void { this.set(read().heldBytes); },
    });
    this.budgetBytes = new Gauge({
      name: 'pixiu_ws_buffer_budget_bytes',
      help: 'The node\'s budget for pixiu_ws_buffered_bytes (PIXIU_SOCKET_BUFFER_BUDGET_BYTES, or its default); 0: none',
      registers: [registry],
      collect(): void { this.set(read().budgetBytes); },
    });
    this.budgetPauses = new Counter({
      name: 'pixiu_ws_budget_pauses_total',
      help: 'WebSocket connections paused because the node\'s send buffers were at PIXIU_SOCKET_BUFFER_BUDGET_BYTES',
      registers: [registry],
    });
    this.budgetCloses = new Counter({
      name: 'pixiu_ws_budget_closes_total',
      help: 'WebSocket connections closed 4009 for a live broadcast or publication that came while the node\'s send buffers were at PIXIU_SOCKET_BUFFER_BUDGET_BYTES and they were held back',
      registers: [registry],
    });
  }

  /** Makes the gauges read `budget` when scraped. @returns `budget` */
  watch<T extends HeldBytes>(budget: T): T {
    this.#budget = budget;
    return budget;
  }
}
