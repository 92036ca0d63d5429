/**
 * The appends of a stored message to its recipients' inboxes, as ingest issues them
 * (ingest.ts, DESIGN.md §1, §7): every append queued before the first yield (what
 * keeps batches in order), the record cached when a recipient is online, and each new
 * entry announced to the delivery notify hook.
 */
import type { MsgKind } from '../ids/msg-id.js';
import type { AppendResult, Flow, Inbox, InboxEntry } from '../inbox/inbox.js';
import type { MessageStore, PutResult, StoredMessage } from '../store/message-store.js';

/**
 * Called after a message is appended to a user's inbox (the delivery notify hook):
 * `append` is the script's answer (seq, epoch, and in `nodes` the nodes holding the
 * user's live connections, from presence), `entry` the new inbox entry and `record`
 * the stored message it names, so a local session can deliver it without reading
 * either back (docs/decisions.md "Local appends are delivered without a read").
 */
export type AppendedHook = (user: string, append: AppendResult, entry: InboxEntry, record: StoredMessage) => void;

/** What the appends need of ingest's dependencies (ingest.ts `IngestDeps`). */
export interface AppendDeps {
  readonly store: MessageStore;
  readonly inbox: Inbox;
  readonly onAppended?: AppendedHook;
}

/**
 * Appends a stored message to each user's inbox, all queued before the first yield
 * (what keeps batches in order), caches the record when one of them is online,
 * notifies each new entry, and tells whether every append was a duplicate.
 *
 * @throws the first append's failure when any failed (Inbox.appendFailure: for a key
 *   of the wrong type, an INTERNAL naming the user), after notifying the entries of
 *   the appends that went through: those users have the message now, and a retry
 *   finds their appends duplicates and notifies nobody (without this, a user online
 *   waited for a heartbeat pull to get it)
 */
export async function appendAll(
  deps: AppendDeps, put: PutResult, users: readonly string[], kind: MsgKind, flow: Flow, extra?: { room: string },
): Promise<{ appends: AppendResult[]; duplicate: boolean }> {
  const expiresAt = put.message.expiresAt;
  const settled = await deps.inbox.appendEach(users, put.id, kind, extra ? { room: extra.room, expiresAt } : { expiresAt }, flow);
  let failure: { reason: unknown; user: string } | undefined;
  const appends = settled.map((s, i) => {
    if (s.status === 'fulfilled') return s.value;
    failure ??= { reason: s.reason, user: users[i] as string };
    return undefined;
  });
  const duplicate = announce(deps, put, users, appends, kind, extra);
  if (failure !== undefined) throw await deps.inbox.appendFailure(failure.user, failure.reason);
  return { appends: appends as AppendResult[], duplicate };
}

/**
 * Caches the record when a user it was just appended for is online, and notifies
 * each entry (`appends[i]` is `users[i]`'s; undefined when it failed), a duplicate
 * too: when the first attempt's append timed out (Redis stalled) but Redis made it,
 * its notify never went out, and the retry that finds it is the only one left to
 * send it; without it an online device waited for a heartbeat pull. A notify of an
 * entry already delivered costs the device's session one read (machine.ts `offer`).
 * @returns true when nothing new happened: every append was a duplicate of a stored message
 */
function announce(
  deps: AppendDeps, put: PutResult, users: readonly string[], appends: readonly (AppendResult | undefined)[], kind: MsgKind, extra?: { room: string },
): boolean {
  const { onAppended, store } = deps;
  rememberIfOnline(store, put, appends);
  let duplicate = put.duplicate;
  appends.forEach((a, i) => {
    if (a === undefined) return;
    if (!a.duplicate) duplicate = false;
    const entry: InboxEntry = extra ? { seq: a.seq, id: put.id, kind, room: extra.room } : { seq: a.seq, id: put.id, kind };
    onAppended?.(users[i] as string, a, entry, put.message);
  });
  return duplicate;
}

/**
 * Caches the record when a recipient it was just appended for is online (presence
 * names a node): their delivery reads it at once. Before any notify goes out.
 */
export function rememberIfOnline(store: MessageStore, put: PutResult, appends: readonly (AppendResult | undefined)[]): void {
  if (appends.some((a) => a !== undefined && a.nodes.length > 0)) store.remember(put);
}
