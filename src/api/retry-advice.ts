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

/** True when a request body (a batch item) carries a `client_msg_id`. */
export function hasClientMsgId(body: unknown): boolean {
  return typeof body === 'object' && body !== null && typeof (body as { client_msg_id?: unknown }).client_msg_id === 'string';
}

/** What may have happened, and how to retry it, by ingest route (a batch item is a message), for a request with a client_msg_id. */
const KEYED: Readonly<Record<IngestRoute, string>> = {
  message: 'the message may have been stored and appended anyway: retry later with the same client_msg_id, which completes it without a duplicate',
  batch: 'the message may have been stored and appended anyway: retry the item later with the same client_msg_id, which completes it without a duplicate',
  broadcast: 'the broadcast may have been stored and published anyway: retry later with the same client_msg_id, which completes it without publishing it twice',
  channel: 'the publication may have been published anyway: retry later with the same client_msg_id, which does not publish it twice on this channel',
};

/**
 * The same for a request (a batch item) without one: a retry cannot be told from a new
 * one, and a key given only on the retry names nothing done before (a reviewer's nit:
 * "retry later with the same client_msg_id" was said to requests that had none).
 */
const UNKEYED: Readonly<Record<IngestRoute, string>> = {
  message: 'the message may have been stored and appended anyway: this request had no client_msg_id, so a retry may store it a second time '
    + '(send each message with a client_msg_id to retry it safely)',
  batch: 'the message may have been stored and appended anyway: this item had no client_msg_id, so a retry may store it a second time '
    + '(send each item with a client_msg_id to retry it safely)',
  broadcast: 'the broadcast may have been stored and published anyway: this request had no client_msg_id, so a retry may publish it again '
    + '(send each broadcast with a client_msg_id to retry it safely)',
  channel: 'the publication may have been published anyway: this request had no client_msg_id, so a retry may publish it again '
    + '(send each publication with a client_msg_id to retry it safely)',
};

/** The shared ending of a Redis failure's words (src/redis/client.ts `toRedisError`). */
const RETRY_LATER = /[,;] retry later$/;

/**
 * `err` as a producer's write route answers it: a Redis failure whose words end in the
 * shared "retry later" (`Redis is unavailable, retry later`, a timeout, a state such as
 * `Redis refuses writes: it is out of memory (maxmemory); retry later`) keeps its cause
 * and ends instead with what may have been done and how to retry it
 * (`Redis is unavailable; the message may have been stored and appended anyway: retry
 * later with the same client_msg_id, …`, or, for a request without one, `…: this
 * request had no client_msg_id, so a retry may store it a second time (…)`). Any other
 * error (one whose words already say what to do, as a batch's `an earlier message …
 * was not appended`) is answered as it is.
 * @param route the ingest route that answers it; none: `err` unchanged
 * @param keyed whether the request (the batch item) had a `client_msg_id`
 * @returns a new PixiuError of the same code, cause and Retry-After, or `err`
 */
export function withRetryAdvice(err: PixiuError, route: IngestRoute | undefined, keyed: boolean): PixiuError {
  if (route === undefined || !isRedisFailure(err) || !RETRY_LATER.test(err.message)) return err;
  return new PixiuError(err.code, `${err.message.replace(RETRY_LATER, '')}; ${(keyed ? KEYED : UNKEYED)[route]}`, {
    cause: err.cause, retryAfterSeconds: err.retryAfterSeconds,
  });
}
