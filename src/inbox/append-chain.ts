/**
 * The appends of one batch to one user land in the order made, or stop where one was
 * refused (docs/api.md "Messages": batch order, also across a retry). A batch's flow
 * (tick-pipeline.ts) sends its appends in order, on one connection, and fails the ones
 * still waiting when one fails; but up to the pipeline's bound are already on the wire
 * by then. For a dropped connection or a timeout they share the failed one's fate, but
 * Redis answers a state reply (BUSY, OOM, READONLY, LOADING, MASTERDOWN) to one command
 * and may run the next of the same connection a moment later: a later item to the same
 * user was appended (201) while the earlier one was 503, and the earlier one's retry
 * landed after it (a review's F2). So each append of a batch names the last append
 * before it to the same user that has no answer yet, and the script refuses it, writing
 * nothing, when that one is not in the inbox (`append-13.lua` step 2a).
 */
/**
 * A flow whose appends to one user land in the order made (`Inbox.orderedFlow`): per
 * user, the MsgID of the last append sent in it that has not been answered as done.
 *
 * An append answered as done is forgotten: the next one to that user names none, so it
 * is not refused when that one has since been trimmed away by the cap (other requests'
 * appends to the user). One that failed stays named: every later append to the user in
 * the flow is refused (the retry of the batch appends them in order). An entry lives
 * while its user's last append is in flight or failed: a batch to 100,000 users keeps
 * the pipeline's bound of them (2,000) and its failures, not one per user.
 */
export class AppendChain {
  /** Per inbox key (one per user), the MsgID of the last append sent and not answered as done. */
  readonly #open = new Map<string, string>();

  /**
   * An append of `msgId` to the inbox `inboxKey` is being sent now, after every earlier
   * one of the flow: answers the MsgID it must find in the inbox (`append-13.lua`
   * ARGV[10]), "" for none, and records it as the last.
   */
  sending(inboxKey: string, msgId: string): string {
    const earlier = this.#open.get(inboxKey) ?? '';
    this.#open.set(inboxKey, msgId);
    return earlier;
  }

  /** The append of `msgId` to `inboxKey` is done (appended, or there already): later ones need not ask for it. */
  done(inboxKey: string, msgId: string): void {
    if (this.#open.get(inboxKey) === msgId) this.#open.delete(inboxKey);
  }
}
