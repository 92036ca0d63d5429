/**
 * After a live `reset`, which `msg`s a connection is sent again as messages it had
 * (DESIGN.md §5: a message is sent twice on one connection only marked `redelivered`).
 * A rotation keeps the stream: seqs 1..`through` of the new epoch are the old one's
 * (src/inbox/lineage.ts), so the retained messages this connection was sent under the
 * old epoch come again at the same seqs, after the `reset`, and go out marked — as the
 * part of the `trimmed` gap before them the device had is (resume.ts `hadAfterReset`;
 * docs/protocol.md, `msg`; docs/decisions.md "A live reset marks the messages sent
 * again").
 *
 * The lineage alone does not prove a seq names the same message: seqs Redis assigned
 * again under the old epoch before the rotation (a node that had not read a raise yet)
 * are vouched for too (docs/decisions.md "The trimmed gap after a `reset` says which
 * of its seqs the device had", what it leaves). A `msg` marked where it is news would be
 * hidden by a client that trusts the mark, so each seq is also checked against the
 * MsgID the machine delivered at it under the old epoch (seq-names.ts: the newest 64
 * seqs known): a seq not known there, or naming another message, goes out unmarked —
 * a client matching by `id` (docs/protocol.md, `reset`) still dedupes it. Pure: no I/O.
 */
import type { InboxPage, PageEntry } from '../inbox/inbox.js';
import type { EpochLineage } from '../inbox/lineage.js';
import { hadAfterReset } from './resume.js';
import type { SeqNames } from './seq-names.js';

/**
 * The seqs `from < seq ≤ through` of a connection's new epoch that it was sent under the
 * old one, and the MsgIDs the machine knew them by there.
 */
export interface ResentSeqs {
  readonly from: number;
  readonly through: number;
  /** The old epoch's seq names (the guard's, as they were when the epoch changed; no longer written). */
  readonly names: SeqNames;
}

/**
 * What a connection reset to `page`'s epoch was sent of it under `epoch`: its sends
 * there, seqs `sendsAfter < seq ≤ sentThrough`, as far as the new epoch goes on from
 * that one's numbering (`lineage`, resume.ts `hadAfterReset`: none without one, for an
 * epoch created afresh, of another epoch, or a loss the node proved).
 * @param sendsAfter the seq its sends under `epoch` came after (where it joined; 0 when `epoch` came by a `reset`)
 * @param sentThrough the highest seq it was written under `epoch` (a redelivery round's rewind included)
 * @param names the MsgIDs the machine knew seqs of `epoch` by (undefined: none known)
 * @returns undefined when no seq of it can be marked
 */
export function resentAfterReset(
  epoch: string | null | undefined, sendsAfter: number, sentThrough: number, page: InboxPage, lineage: EpochLineage | undefined, names: SeqNames | undefined,
): ResentSeqs | undefined {
  const through = hadAfterReset(epoch, sentThrough, page, lineage);
  return names !== undefined && through > sendsAfter ? { from: sendsAfter, through, names } : undefined;
}

/** True when `entry`'s `msg` is one its connection was sent before its `reset` (see the module comment). */
export function wasResent(resent: ResentSeqs | undefined, entry: Pick<PageEntry, 'seq' | 'id'>): boolean {
  return resent !== undefined && entry.seq > resent.from && entry.seq <= resent.through && resent.names.names(entry.seq, entry.id);
}
