/**
 * The words of `GET /readyz` for a store that takes no messages now, or some of them
 * (docs/api.md, "Operations"): the whole store (its writes suspended, its lease's
 * deadline passed) or only some partitions (one reopening its database after a failed
 * write, one with a write stalled past PIXIU_STORE_WRITE_TIMEOUT), whose messages are
 * refused while the node's other partitions have no write failed or stalled yet. Said
 * exactly, so an operator does not read a full disk under one partition as a node that
 * takes nothing, nor a frozen disk under all of them (whose other partitions stall at
 * their next write) as a node that still takes most messages.
 */

/** One partition that takes no writes now: its MsgID partition byte and its refusal's message. */
export interface PartitionOut {
  readonly index: number;
  readonly reason: string;
}

/**
 * The readiness sentence: `the message store takes no messages now: <reason>` when
 * `storeWide` is given, else, for the partitions in `out` (in index order, at least
 * one), `message store partition 4 takes no messages now (no write failed or
 * stalled yet on this node's other 7 partitions): <its refusal>`, the refusals of several joined by `; `.
 * `count`: how many partitions this node's store has. Undefined when neither.
 */
export function writeProblemWords(storeWide: string | undefined, out: readonly PartitionOut[], count: number): string | undefined {
  if (storeWide !== undefined) return `the message store takes no messages now: ${storeWide}`;
  if (out.length === 0) return undefined;
  const named = out.length === 1
    ? `message store partition ${out[0]!.index} takes`
    : `message store partitions ${out.map((p) => p.index).join(', ')} take`;
  const others = count - out.length;
  // Only what is known of the others: a disk frozen under them all stalls them too at
  // their next write, so "they take theirs" would promise more than is known.
  const rest = others === 0 ? '' : others === 1
    ? ' (no write failed or stalled yet on this node\'s other partition)'
    : ` (no write failed or stalled yet on this node's other ${others} partitions)`;
  return `${named} no messages now${rest}: ${out.map((p) => p.reason).join('; ')}`;
}
