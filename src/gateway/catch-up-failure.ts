/**
 * What a connection does when its broadcast catch-up (`last_bseq`, DESIGN.md §8) fails
 * to read the stream: one log line, thinned across the node's connections, and an
 * `error` frame; live broadcasts go on (ws-connection.ts `welcomed`).
 */
import { PixiuError, outageFields } from '../errors.js';
import { thinnedFields, type LogThrottle } from '../log-throttle.js';
import { isWrongTypeFailure } from '../redis/wrong-type.js';
import type { BroadcastSubscription } from '../broadcast/subscription.js';
import type { ConnectionDeps } from './gateway-deps.js';

/** The warning of a connection's broadcast catch-up (`last_bseq`) whose read failed. */
export const CATCH_UP_FAILED_LOG = 'broadcast catch-up failed; live broadcasts continue';

/** How one failed catch-up is logged ({@link CATCH_UP_FAILED_LOG}) and told to its client. */
export interface CatchUpFailure {
  readonly level: 'debug' | 'warn' | 'error';
  readonly fields: object;
  /** The `error` frame's error. */
  readonly error: PixiuError;
}

/**
 * The log line and `error` frame of a failed catch-up. Thinned across the node's
 * connections, as the outage's other lines are (docs/api.md "Errors"): after a Redis
 * blip every client reconnecting with `last_bseq` fails here (a soak finding: 25 warn
 * lines in one second, one per connection); a line left out is logged at debug. The
 * stream's key of the wrong type is at error, naming it (no retry cures it;
 * src/redis/wrong-type.ts), thinned the same way: the node's reader logs it too.
 * @param log the node's thinning of these lines (ConnectionDeps `broadcast.catchUpFailureLog`)
 */
export function catchUpFailure(err: unknown, log: LogThrottle): CatchUpFailure {
  const left = log.take();
  const wrongType = isWrongTypeFailure(err);
  const fields = wrongType ? { err: err.cause, reason: err.message, code: err.code } : outageFields(err);
  const error = err instanceof PixiuError ? err : new PixiuError('UNAVAILABLE', 'missed broadcasts could not be read');
  if (left === undefined) return { level: 'debug', fields, error };
  return { level: wrongType ? 'error' : 'warn', fields: { ...fields, ...thinnedFields(left) }, error };
}

/**
 * Starts a connection's broadcast feed once its `welcome` is out, catching up from
 * `lastBseq` (none: live only); a catch-up whose read fails is handed to `failed` as
 * {@link catchUpFailure} says, and live broadcasts go on.
 */
export function resumeBroadcasts(
  feed: BroadcastSubscription, deps: NonNullable<ConnectionDeps['broadcast']>, lastBseq: string | undefined, failed: (failure: CatchUpFailure) => void,
): void {
  feed.resume(deps.stream, lastBseq).catch((err: unknown) => failed(catchUpFailure(err, deps.catchUpFailureLog)));
}
