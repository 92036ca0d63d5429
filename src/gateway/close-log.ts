/**
 * How a close the server decided is logged (ws-connection.ts `close`, `tick`): a slow
 * consumer at warn — operators need to see these, and the client itself usually sees
 * only 1006 (docs/protocol.md) — protocol abuse, ack timeouts and idle terminations at
 * info, any other (replaced, token expired, shutdown, …) at debug.
 *
 * The info lines are thinned node-wide ({@link CloseLogThinning}): a client's own
 * behaviour repeats them — a device that never acks is closed 4008 every ~25 s for as
 * long as it reconnects, a fleet of phones losing coverage is a stream of idle
 * terminations — and a soak tester's 45 non-acking devices of 1,600 wrote 3,408 of
 * them in 30 minutes, every line of the log. The first of each kind is logged, then at
 * most one per {@link OUTAGE_LOG_INTERVAL_MS} of each kind, carrying `notLogged`, how many were left
 * out since; those are logged at debug. `pixiu_ws_closes_total{code,by}` counts them all.
 */
import { CloseCode } from '../delivery/close-codes.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';

/** A log level a connection's lines use (error: a broadcast catch-up on a key of the wrong type, ws-connection.ts). */
export type ConnectionLogLevel = 'debug' | 'info' | 'warn' | 'error';

/** The line of a connection the server cut for its silence (no close frame: it is most likely gone). */
export const IDLE_TERMINATED_LOG = 'idle connection terminated';

/** The level and message of the line that logs a server close with `code`. */
export function closeLogLine(code: number): { readonly level: ConnectionLogLevel; readonly msg: string } {
  if (code === CloseCode.slowConsumer) return { level: 'warn', msg: 'slow consumer closed' };
  if (code === CloseCode.protocolAbuse || code === CloseCode.ackTimeout) return { level: 'info', msg: 'connection closed by the server' };
  return { level: 'debug', msg: 'closing connection' };
}

/**
 * The node's thinning of the info lines of server closes (see the module's doc): one
 * {@link LogThrottle} per kind of close (its code; the idle cut), shared by every
 * connection of the node, so that a flood of one kind (4008s) hides no other (4003s).
 */
export class CloseLogThinning {
  readonly #byKind = new Map<string, LogThrottle>();

  /**
   * The level to log a close line of `level` at now: an info line at info when one of
   * its `kind` may be logged now, with `notLogged` when some were left out before it,
   * else at debug; a line at any other level as it is.
   * @param kind what the line tells: the close code, or {@link IDLE_TERMINATED_LOG}
   */
  #levelOf(level: ConnectionLogLevel, kind: string): { readonly level: ConnectionLogLevel; readonly notLogged?: number } {
    if (level !== 'info') return { level };
    let throttle = this.#byKind.get(kind);
    if (throttle === undefined) this.#byKind.set(kind, throttle = new LogThrottle(OUTAGE_LOG_INTERVAL_MS));
    const left = throttle.take();
    return left === undefined ? { level: 'debug' } : { level, ...thinnedFields(left) };
  }

  /**
   * The line of a server close with `code` ({@link closeLogLine}), thinned: the level,
   * `fields` with `notLogged` when it applies, and the message, as a connection's
   * logger takes them (ws-connection.ts `#logLine`).
   */
  closeLine(code: number, fields: object): [ConnectionLogLevel, object, string] {
    const line = closeLogLine(code);
    const { level, ...thinned } = this.#levelOf(line.level, String(code));
    return [level, { ...fields, ...thinned }, line.msg];
  }

  /** The line of an idle cut ({@link IDLE_TERMINATED_LOG}, at info), thinned as {@link closeLine}. */
  idleLine(fields: object): [ConnectionLogLevel, object, string] {
    const { level, ...thinned } = this.#levelOf('info', IDLE_TERMINATED_LOG);
    return [level, { ...fields, ...thinned }, IDLE_TERMINATED_LOG];
  }
}

/** `reason` cut to what a close frame carries (123 bytes of UTF-8; `ws` throws past it), on a character boundary. */
export function closeReason(reason: string): string {
  let r = reason.slice(0, 123);
  while (Buffer.byteLength(r) > 123) r = r.slice(0, -1);
  // Not half a surrogate pair (an emoji cut in two).
  return /[\uD800-\uDBFF]$/.test(r) ? r.slice(0, -1) : r;
}
