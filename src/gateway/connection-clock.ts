/**
 * One clock for every connection of the node: server pings (every heartbeat), the
 * idle close, and token expiry (DESIGN.md §6). A single interval visits each
 * connection a few times a second instead of two timers per connection: timers are a
 * fair share of an idle connection's memory (bench:e2e, case c), and a token that
 * expires in a hundred years needs no timer at all (Node timers overflow past ~24.8
 * days). Each visit is a couple of comparisons; 10,000 connections cost microseconds.
 *
 * Two clocks are read at each tick. A token's `exp` is a time on the wall clock (RFC
 * 7519 §4.1.4), so its expiry is judged on `Date.now()`. Pings and the idle close
 * measure how long since something happened, so they run on a clock that never steps
 * (`performance.now()`), as the store lease does (docs/decisions.md): on the wall
 * clock, a forward step of an hour (NTP correcting a slow clock, a VM resumed) cut
 * every connection of the node as silent for an hour, and a backward one kept a dead
 * connection, its presence and its slot of the per-user limit, for the size of the
 * step (walk31 F4, F4b).
 */

/** What the clock visits. */
export interface Ticking {
  /**
   * Called every tick.
   * @param nowMs the wall clock, ms since the epoch: what a token's `exp` is judged by
   * @param monoMs the monotonic clock ({@link Clocks.monotonicMs}), ms from any origin:
   *   what heartbeats and silence are measured on
   */
  tick(nowMs: number, monoMs: number): void;
}

/** The two clocks a {@link ConnectionClock} reads (default: the process's). */
export interface Clocks {
  /** The wall clock, ms since the epoch (it may step). */
  wallMs(): number;
  /** A clock that never steps, ms from an arbitrary origin (it may not be compared with the wall clock). */
  monotonicMs(): number;
}

/** The process's clocks: `Date.now()` and `performance.now()`. */
const SYSTEM_CLOCKS: Clocks = { wallMs: () => Date.now(), monotonicMs: () => performance.now() };

/**
 * When a new connection's first server heartbeat is due, on `nowMs`'s clock (the
 * monotonic one, {@link Clocks.monotonicMs}): after a
 * random 50–100 % of the period (then every period). Connections made together (a node
 * restart, a reconnect storm) would otherwise ping, pull their inbox and refresh
 * presence in the same instant every period, a burst that stalls live delivery
 * (bench:e2e's p99).
 * @param heartbeatMs the heartbeat period, ms
 */
export function firstHeartbeatAt(nowMs: number, heartbeatMs: number): number {
  return nowMs + Math.round(heartbeatMs * (0.5 + Math.random() * 0.5));
}

/** The node's connection clock. */
export class ConnectionClock {
  readonly #members = new Set<Ticking>();
  readonly #tickMs: number;
  readonly #clocks: Clocks;
  #timer: NodeJS.Timeout | undefined;

  /**
   * @param tickMs how often each connection is visited, ms: the precision of pings,
   *   idle closes and token expiry (a token closes within this of its `exp`)
   * @param clocks the wall and monotonic clocks read at each tick (default: the process's)
   */
  constructor(tickMs: number, clocks: Clocks = SYSTEM_CLOCKS) {
    this.#tickMs = tickMs;
    this.#clocks = clocks;
  }

  /** Now on the monotonic clock the members' heartbeats run on, ms: for what a member notes between ticks (a frame heard). */
  monotonicMs(): number {
    return this.#clocks.monotonicMs();
  }

  /** The tick period for a heartbeat: a quarter second, finer for heartbeats under half a second. */
  static tickFor(heartbeatMs: number): number {
    return Math.max(10, Math.min(250, Math.floor(heartbeatMs / 2)));
  }

  add(member: Ticking): void {
    this.#members.add(member);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), this.#tickMs);
      // The clock never keeps the process alive on its own.
      this.#timer.unref();
    }
  }

  delete(member: Ticking): void {
    this.#members.delete(member);
    if (this.#members.size === 0) this.stop();
  }

  /** Stops ticking (shutdown, or no connection left). */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #tick(): void {
    const now = this.#clocks.wallMs();
    const mono = this.#clocks.monotonicMs();
    for (const m of this.#members) m.tick(now, mono);
  }
}

/**
 * Pongs a client may owe: a browser answers each server ping with one, and one late
 * on a slow network may meet the next ping's. More pongs than owed are unsolicited.
 */
export const MAX_PONGS_OWED = 2;

/**
 * One connection's heartbeat (DESIGN.md §6): when its client was last heard from,
 * when its next server ping is due, and how many pongs it owes for the pings sent.
 * Every time given to it is on the monotonic clock ({@link Clocks.monotonicMs}), ms.
 */
export class Heartbeat {
  readonly #periodMs: number;
  #lastSeen: number;
  #nextPingAt: number;
  #pongsOwed = 0;

  /** @param periodMs the heartbeat period, ms; the first ping is due at {@link firstHeartbeatAt} */
  constructor(nowMs: number, periodMs: number) {
    this.#periodMs = periodMs;
    this.#lastSeen = nowMs;
    this.#nextPingAt = firstHeartbeatAt(nowMs, periodMs);
  }

  /** The client was heard from (a frame, a ping or a pong). */
  heard(nowMs: number): void {
    this.#lastSeen = nowMs;
  }

  /** How long the client has been silent at `nowMs`, ms. */
  silentMs(nowMs: number): number {
    return nowMs - this.#lastSeen;
  }

  /**
   * True when a server ping is due at `nowMs`: the caller sends it; the next is due a
   * period later, and the client owes its pong (at most {@link MAX_PONGS_OWED}).
   */
  pingDue(nowMs: number): boolean {
    if (nowMs < this.#nextPingAt) return false;
    this.#nextPingAt = nowMs + this.#periodMs;
    this.#pongsOwed = Math.min(this.#pongsOwed + 1, MAX_PONGS_OWED);
    return true;
  }

  /** A pong came at `nowMs`. @returns true when it answers a server ping; false for one the server did not ask for */
  pong(nowMs: number): boolean {
    this.#lastSeen = nowMs;
    if (this.#pongsOwed === 0) return false;
    this.#pongsOwed -= 1;
    return true;
  }

  /** Brings the next ping forward to a random point within `withinMs` of `nowMs` (never later than it was). */
  soon(withinMs: number, nowMs: number): void {
    this.#nextPingAt = Math.min(this.#nextPingAt, nowMs + Math.floor(Math.random() * withinMs));
  }
}
