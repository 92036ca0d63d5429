/**
 * What the per-user machine asks of its connections' delivery states together
 * (connection-state.ts `Conn`): whether one is behind a seq, was sent past one, would
 * be reset from an epoch, or is still joining. Read-only.
 */
import type { InboxPage } from '../inbox/inbox.js';
import type { Conn } from './connection-state.js';

/** True when a ready connection (paused or not) has not been sent `seq` yet. */
export function anyReadyBefore(conns: Iterable<Conn>, seq: number): boolean {
  for (const c of conns) if (c.phase === 'ready' && c.sent < seq) return true;
  return false;
}

/** True when a ready connection was already sent `seq` (or past it): a notify of it names a reused seq. */
export function anySentFrom(conns: Iterable<Conn>, seq: number): boolean {
  for (const c of conns) if (c.phase === 'ready' && Math.max(c.sent, c.redeliverUpTo) >= seq) return true;
  return false;
}

/**
 * True when `page` resets a connection to an epoch that may go on from the one it
 * counted in, so that the epoch's lineage (src/inbox/lineage.ts) is worth a read before
 * it is delivered: a ready one, the machine's epoch being `epoch` and the page's another,
 * or a joining one whose `last_seq` names another epoch. Rare: an epoch change.
 */
export function resetsFromEpoch(conns: Iterable<Conn>, epoch: string | null | undefined, page: InboxPage): boolean {
  if (page.epoch === null) return false;
  for (const c of conns) {
    const from = c.phase === 'ready' ? epoch : c.resume.kind === 'after' ? c.resume.epoch : undefined;
    if (typeof from === 'string' && from !== page.epoch) return true;
  }
  return false;
}

/** True while a connection waits for the fetch that decides where it starts. */
export function anyJoining(conns: Iterable<Conn>): boolean {
  for (const c of conns) if (c.phase === 'joining') return true;
  return false;
}
