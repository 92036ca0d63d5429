/**
 * Plain words for the Redis client's own failure messages, as log lines give them
 * (`reason`, `cause`: src/errors.ts `outageFields`). ioredis words a command refused
 * while it reconnects by its options — "Stream isn't writeable and enableOfflineQueue
 * options is false", "Reached the max retries per request limit (which is 1). Refer
 * to "maxRetriesPerRequest" option for details." — which send an operator to client
 * settings Pixiu chose on purpose (src/redis/client.ts `createRedis`: fail fast, never
 * queue) rather than to the fault: the connection to Redis is down (an ops newcomer's
 * finding). Any other message is kept as it is; socket errors such as ECONNREFUSED
 * already say what happened.
 *
 * The texts are ioredis 5's (built/Redis.js `sendCommand`, built/errors/
 * MaxRetriesPerRequestError.js).
 */

/** An ioredis message, and what it means here. */
interface PlainReason {
  readonly matches: RegExp;
  readonly plain: string;
}

const PLAIN_REASONS: readonly PlainReason[] = [
  // Sent while the connection is down: with no offline queue, refused at once.
  { matches: /^Stream isn't writeable and enableOfflineQueue options is false$/, plain: 'Redis connection lost (reconnecting)' },
  // Sent, then the connection dropped before Redis answered; not sent again.
  { matches: /^Reached the max retries per request limit \(which is \d+\)\./, plain: 'Redis connection lost before it answered (reconnecting)' },
];

/** `message` in plain words when it is one of the Redis client's own (see above); else `message`. */
export function plainReason(message: string): string {
  for (const r of PLAIN_REASONS) if (r.matches.test(message)) return r.plain;
  return message;
}
