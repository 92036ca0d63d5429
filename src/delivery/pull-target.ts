/**
 * Which connection the per-user machine's next fetch reads for (fetch-cycle.ts `next`,
 * DESIGN.md §5): whether a connection needs a fetch now, given the pull the machine
 * was asked for, and which of those that do goes first. Pure: it reads the
 * connections' state (connection-state.ts) and changes nothing.
 */
import type { Conn } from './connection-state.js';
import { anySentFrom } from './conn-queries.js';

/** What the machine knows and was asked to pull for, as it stands at a pump (fetch-cycle.ts: its getters of the same names). */
export interface PullAsk {
  /** Unacked messages a connection may hold (MachineConfig `window`). */
  readonly window: number;
  /** Highest seq known to exist. */
  readonly latest: number;
  /** A heartbeat (or a notify that was not new) asked to pull even though nothing is known to be new. */
  readonly force: boolean;
  /** A pull a full window reads for too (one entry, to see a new epoch). */
  readonly probe: boolean;
  /** The lowest seq a notify named that was not new: a full window sent it reads too; undefined: none. */
  readonly reusedFrom: number | undefined;
}

/**
 * Whether a connection needs a fetch now. A full window takes nothing, but a pull (a
 * heartbeat, a `ping`) still reads for it: only a read sees a new epoch, whose `reset`
 * must not wait for an ack or a redelivery round (docs/protocol.md).
 */
export function wantsFetch(c: Conn, ask: PullAsk): boolean {
  if (c.phase === 'joining') return true;
  if (c.paused) return false;
  if (c.inflight.length >= ask.window) {
    return ask.probe || (ask.reusedFrom !== undefined && anySentFrom([c], ask.reusedFrom));
  }
  return c.sent < ask.latest || ask.force;
}

/** True when a connection wants a fetch from a cursor other than `after`. */
export function anyWantsBeside(conns: Iterable<Conn>, ask: PullAsk, after: number): boolean {
  for (const c of conns) if (wantsFetch(c, ask) && (c.phase === 'joining' || c.sent !== after)) return true;
  return false;
}

/**
 * The connection the next fetch reads for, among those that want one ({@link wantsFetch});
 * undefined: none does. Among equals, the one served longest ago (`servedAt`).
 */
export function pullTarget(conns: Iterable<Conn>, ask: PullAsk): Conn | undefined {
  let target: Conn | undefined;
  let targetBehind = false;
  for (const c of conns) {
    if (!wantsFetch(c, ask)) continue;
    // A connection known to be behind goes before one that only a heartbeat's pull
    // wants: a pull that brings nothing ends the fetching, and (after a failed fetch)
    // the one behind would wait for the next event.
    const behind = c.phase === 'joining' || c.sent < ask.latest;
    if (target === undefined || (behind && !targetBehind) || (behind === targetBehind && c.servedAt < target.servedAt)) {
      target = c;
      targetBehind = behind;
    }
  }
  return target;
}
