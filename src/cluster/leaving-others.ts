/**
 * The warning a node logs when it stops while other nodes run on its Redis (the
 * clusterchaos tester's F1): a message's content lives only in the store of the node
 * that took it (DESIGN.md §9), so while that node is down every other node's delivery
 * of a user with an undelivered message stored there stalls, new messages included,
 * and their history reads and retries of those messages answer 503 — until a node runs
 * on its data dir again (README, "Several nodes"). Only a message not expired: an inbox
 * entry records its message's expiry (`exp`, src/inbox/lua/append-13.lua), and readers
 * take an expired one for a gap without asking its node — but an entry an older
 * release appended records none, and stalls as an unexpired one. A node stopped for good to scale in
 * left a cluster-wide stall behind an info-level `shutting down`; this says so where
 * the operator looks first, with what README "Several nodes" needs to retire its
 * partitions. Not logged by a node alone on its Redis: no node waits on it — nor for
 * a dead process that served this node's own store, killed and replaced by this node:
 * its registration was removed at this node's start (node-registry.ts `start`).
 */
import type { Logger } from '../logger.js';
import { partitionSpan } from './partition-claims.js';

/** The message of the warning (fixed, as every log message: the context is in fields). */
export const LEAVING_OTHERS_MSG = 'this node stops while other nodes run: on every node, delivery to each user with a message stored here '
  + 'neither delivered nor expired (or whose inbox entry, appended by an older release, records no expiry) stalls '
  + '(and reads and retries of those messages answer 503) until a node runs on this data dir again; '
  + 'to remove a node for good, keep it running until its messages have expired (to lose none), then stop it and retire its partitions (README, "Several nodes")';

/** The stopping node's store, as the warning names it. */
export interface LeavingStore {
  /** Its store id (`store partitions claimed`, `pixiu inspect cluster`). */
  readonly storeId: string;
  /** The data dir a node must run on again for its messages to be read. */
  readonly dataDir: string;
  /** Its block of MsgID partitions: the first, and how many (`PIXIU_PARTITIONS`). */
  readonly partitionBase: number;
  readonly partitions: number;
}

/**
 * Logs {@link LEAVING_OTHERS_MSG} at warn when `others` (the other nodes registered in
 * the node registry now: NodeRegistry.othersNow) is not empty, with fields `nodes`
 * (their ids), `store`, `dataDir` and `partitions` (`"48..55"`, as `store partitions
 * claimed` names them); nothing when it is empty.
 * @returns whether it logged
 */
export function warnLeavingOthers(logger: Logger, others: readonly string[], store: LeavingStore): boolean {
  if (others.length === 0) return false;
  logger.warn({
    nodes: others, store: store.storeId, dataDir: store.dataDir, partitions: partitionSpan(store.partitionBase, store.partitions),
  }, LEAVING_OTHERS_MSG);
  return true;
}
