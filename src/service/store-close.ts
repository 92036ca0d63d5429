/**
 * The shutdown's `store` step (DESIGN.md §6; docs/decisions.md "A store's close that
 * does not end in its time is given up"): the message store's close, bounded. On a
 * stalled disk (a frozen file system, a dying disk, a network volume's hiccup) a write
 * in flight never returns, and the close waits for it: without a bound the steps after
 * it (the store's counters, Redis, the embedded redis-server) never ran and SIGTERM
 * never ended (a store reviewer's finding, F3). Past the bound the close is given up
 * with one error line; the shutdown goes on and `pixiu serve` exits non-zero
 * (src/cli/serve.ts `EXIT_UNFINISHED`). A close that fails (rejects: LevelDB's close
 * answering an I/O error) ends the same way, with `shutdown step failed` as its line
 * (shutdown-steps.ts `closeAll`).
 *
 * Giving it up loses nothing acknowledged: a message is answered 2xx only once its write
 * returned (partition.ts: a put resolves after `batch.write`), and by this step the HTTP
 * side has closed (service.ts's order): the puts waiting on a stalled write were answered
 * 503 by the write-stall watchdog (write-stall.ts) or, when it had not fired yet, their
 * requests were cut unanswered at the end of the HTTP grace (upgrade-guard.ts); their
 * producers send them again. LevelDB keeps its files consistent at every write boundary
 * and replays its log at the next open (a batch torn by the exit is dropped whole: it
 * was never acknowledged), and its lock goes with the process.
 *
 * The process itself ends only once the stalled write returns: Node's exit waits for its
 * libuv threads, and a thread held in the kernel by a frozen file system cannot be ended
 * before the thaw by any signal, SIGKILL included (observed with `fsfreeze`: the exit
 * code is seen at the thaw). Everything else of the shutdown is done by then.
 */
import type { Logger } from '../logger.js';
import type { MessageStore } from '../store/message-store.js';
import type { CloseStep } from './shutdown-steps.js';

/**
 * Time the store's close may take beyond the write timeout, ms: a write that began just
 * before the close has its whole write timeout (`PIXIU_STORE_WRITE_TIMEOUT`, the line
 * past which it counts as stalled), and then LevelDB's own close waits for a compaction
 * under way (one table's merge: well under a second on a healthy disk) and a sweep step
 * may run its last batch. A few seconds covers both on a slow disk.
 */
export const STORE_CLOSE_MARGIN_MS = 5_000;

/** The message of the error line of a store's close given up (its context: {@link storeCloseStep}). */
export const STORE_NOT_CLOSED = 'message store did not close in its time (a stalled disk?): the shutdown goes on without it and ends unclean; '
  + 'nothing acknowledged is lost (a message is answered 2xx only once its write returned; those waiting on a stalled write '
  + 'were answered 503 or cut unanswered, to be sent again), and the next start recovers the store from its log. '
  + 'The process ends when the stalled write returns: a process with a thread waiting on the disk is held by the kernel, even after SIGKILL';

/**
 * The shutdown step that closes `store`, given up after `writeTimeoutMs` +
 * {@link STORE_CLOSE_MARGIN_MS} with one error line (`message store did not close in its
 * time …`) naming the partitions with a write still under way (`writing`: partition,
 * folder, ms; empty when LevelDB's own close is what waits) and the store's folder.
 * @param writeTimeoutMs the store's write timeout (`PIXIU_STORE_WRITE_TIMEOUT`), ms
 */
export function storeCloseStep(store: MessageStore, dir: string, writeTimeoutMs: number, logger: Logger): CloseStep {
  return {
    what: 'store',
    run: () => store.close(),
    bound: {
      ms: writeTimeoutMs + STORE_CLOSE_MARGIN_MS,
      giveUp: (ms) => logger.error({ timeoutMs: ms, writing: store.writesInFlight, dir }, STORE_NOT_CLOSED),
    },
  };
}
