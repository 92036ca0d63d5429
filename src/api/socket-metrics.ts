/**
 * The metrics of the node's bound on every socket it accepts (src/gateway/socket-bound.ts:
 * WebSockets and plain HTTP connections together): the bound, the sockets open, and the
 * connections closed at once past it. Part of the service's metrics (metrics.ts
 * `sockets`), in its registry.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** The socket bound's metrics, in one registry. */
export class SocketMetrics {
  /** What {@link open} reads when scraped; set by the gateway ({@link watch}). */
  #open: () => number = () => 0;

  /** The bound, set once at start (connection-bound.ts `socketBound`). */
  readonly max: Gauge;

  /** Sockets the node's HTTP server holds now: from accept to close, WebSockets included. */
  readonly open: Gauge;

  /**
   * Connections closed at once as they were accepted, the node holding {@link max}
   * sockets already: non-zero means clients found the node full (idle connections held
   * by many clients or by one: secaudit F1), and the line `new connection closed at once`
   * says from which address.
   */
  readonly dropped: Counter;

  constructor(registry: Registry) {
    const read = (): number => this.#open();
    this.max = new Gauge({
      name: 'pixiu_sockets_max',
      help: 'The most sockets this node holds at once, WebSockets and plain HTTP connections together (PIXIU_MAX_CONNECTIONS and room for HTTP, set at start); past it a new connection is closed at once',
      registers: [registry],
    });
    this.open = new Gauge({
      name: 'pixiu_sockets',
      help: 'Sockets this node holds now, WebSockets and plain HTTP connections together, idle ones included',
      registers: [registry],
      collect(): void { this.set(read()); },
    });
    this.dropped = new Counter({
      name: 'pixiu_sockets_dropped_total',
      help: 'New connections closed at once because the node held pixiu_sockets_max sockets',
      registers: [registry],
    });
  }

  /** Makes {@link open} read `count` when scraped. */
  watch(count: () => number): void {
    this.#open = count;
  }
}
