/**
 * The words of a 503 UNAVAILABLE on a producer's write route when Redis failed
 * (docs/api.md "Errors"). Such a 503 does not say the work was not done: the message
 * may be stored and appended to some inboxes (the command may have run after its
 * timeout, or the failure came part-way), so a producer that retried without its
 * `client_msg_id` stored it twice. The answer says so, and how to retry, in place of
 * the shared "retry later"; its code stays UNAVAILABLE (clients match on codes).
 */
import { PixiuError } from '../errors.js';
import { isRedisFailure } from '../redis/client.js';
import type { IngestRoute } from './metric-labels.js';

/** What may have happened, and how to retry it, by ingest route (a batch item is a message). */
const ADVICE: Readonly<Record<IngestRoute, string>> = {
  message: 'the message may have been stored and appended anyway: retry later with the same client_msg_id, '
    + 'which completes it without a duplicate (without a client_msg_id, a retry may store it a second time)',
  batch: 'the message may have been stored and appended anyway: retry the item later with the same client_msg_id, '
    + 'which completes it without a duplicate (without a client_msg_id, a retry may store it a second time)',
  broadcast: 'the broadcast may have been stored and published anyway: retry later with the same client_msg_id, '
    + 'which completes it without publishing it twice (without a client_msg_id, a retry may publish it again)',
  channel: 'the publication may have been published anyway: retry later with the same client_msg_id, '
    + 'which does not publish it twice on this channel (without a client_msg_id, a retry may publish it again)',
};

/** The shared ending of a Redis failure's words (src/redis/client.ts `toRedisError`). */
const RETRY_LATER = /[,;] retry later$/;

/**
 * `err` as a producer's write route answers it: a Redis failure whose words end in the
 * shared "retry later" (`Redis is unavailable, retry later`, a timeout, a state such as
 * `Redis refuses writes: it is out of memory (maxmemory); retry later`) keeps its cause
 * and ends instead with what may have been done and how to retry it
 * (`Redis is unavailable; the message may have been stored and appended anyway: retry
 * later with the same client_msg_id, …`). Any other error (one whose words already say
 * what to do, as a batch's `an earlier message … was not appended`) is answered as it is.
 * @param route the ingest route that answers it; none: `err` unchanged
 * @returns a new PixiuError of the same code, cause and Retry-After, or `err`
 */
export function withRetryAdvice(err: PixiuError, route: IngestRoute | undefined): PixiuError {
  if (route === undefined || !isRedisFailure(err) || !RETRY_LATER.test(err.message)) return err;
  return new PixiuError(err.code, `${err.message.replace(RETRY_LATER, '')}; ${ADVICE[route]}`, {
    cause: err.cause, retryAfterSeconds: err.retryAfterSeconds,
  });
}
