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
 * A server there that is not Redis (an HTTP port given as PIXIU_REDIS_URL, an easy
 * mix-up) answers bytes that are no RESP reply; ioredis's decoder words that as its own
 * bug, "Unknown RESP type 72 "H". Please report this." (an ops tester's finding), where
 * the fault is the URL: it is said so, quoting the first byte the server answered.
 *
 * The texts are ioredis 5's and 6.0.0's (built/Redis.js `sendCommand`, built/errors/
 * MaxRetriesPerRequestError.js, built/resp/decoder.js and built/DataHandler.js
 * `returnFatalError`).
 */

import { cutText } from '../text-cut.js';

/** An ioredis message, and what it means here. */
interface PlainReason {
  readonly matches: RegExp;
  /** The plain words, or how to make them from the match. */
  readonly plain: string | ((match: RegExpExecArray) => string);
}

/**
 * What a server that is not Redis answered, from the first byte ioredis's decoder could
 * not read (its type byte, `code`): `it answered "H…": an HTTP server?`. Only an HTTP
 * server, whose answers all start `HTTP/`, is guessed; a byte that is no printable
 * ASCII is shown as `\xNN`.
 */
function notRedis(match: RegExpExecArray): string {
  const code = Number(match[1]);
  const shown = code >= 0x20 && code < 0x7f ? String.fromCharCode(code) : `\\x${code.toString(16).padStart(2, '0')}`;
  const guess = shown === 'H' ? ': an HTTP server?' : '';
  return `the server there does not speak the Redis protocol (it answered "${shown}…"${guess})`;
}

/** ioredis's decoder's failure on an answer that is no RESP reply (see above). */
const NOT_RESP = /^Unknown RESP type (\d+) /;

/** True when `err` is ioredis's decoder failing on an answer that is no RESP reply: the server is not Redis. */
export function isNotRedis(err: Error): boolean {
  return NOT_RESP.test(err.message);
}

const PLAIN_REASONS: readonly PlainReason[] = [
  // Sent while the connection is down: with no offline queue, refused at once.
  { matches: /^Stream isn't writeable and enableOfflineQueue options is false$/, plain: 'Redis connection lost (reconnecting)' },
  // Sent, then the connection dropped before Redis answered; not sent again.
  { matches: /^Reached the max retries per request limit \(which is \d+\)\./, plain: 'Redis connection lost before it answered (reconnecting)' },
  // A reply that is not RESP: the server is something else.
  { matches: NOT_RESP, plain: notRedis },
];

/** `message` in plain words when it is one of the Redis client's own (see above); else `message`. */
export function plainReason(message: string): string {
  for (const r of PLAIN_REASONS) {
    const match = r.matches.exec(message);
    if (match !== null) return typeof r.plain === 'string' ? r.plain : r.plain(match);
  }
  return message;
}

/** Whether a reply refuses a connection's credentials: a wrong password or user (WRONGPASS), none given where one is required (NOAUTH). */
export function isCredentialsRefusal(message: string): boolean {
  return /^(NOAUTH|WRONGPASS)\b/.test(message);
}

/**
 * What Redis's refusal of a command ioredis sends on its own when it (re)connects
 * (HELLO, AUTH, SELECT, CLIENT SETNAME) means, in plain words: the connection is never
 * ready, and every command is then refused as "connection lost" while ioredis
 * reconnects, so these words are what `/readyz` and a fenced store give as long as it
 * lasts (src/redis/client.ts `connectRefusal`), where they said only "Redis does not
 * answer" after a Redis gained a `requirepass` (a black-box SRE's finding). Redis's
 * own text stays in the log line's `reason`.
 * @param message the ReplyError's message (`NOAUTH HELLO must be called …`, `WRONGPASS invalid username-password pair …`)
 */
export function connectRefusalWords(message: string): string {
  if (/^NOAUTH\b/.test(message)) {
    return 'Redis refuses this node\'s connection: it requires a password, which PIXIU_REDIS_URL does not give '
      + '(NOAUTH; give it as redis://:password@host:port, or redis://user:password@host:port for an ACL user)';
  }
  if (/^WRONGPASS\b/.test(message)) {
    return 'Redis refuses this node\'s connection: the password (or user) in PIXIU_REDIS_URL is wrong, or the user is disabled (WRONGPASS)';
  }
  if (/^NOPERM\b/.test(message)) {
    return 'Redis refuses this node\'s connection: the ACL user of PIXIU_REDIS_URL may not run a command sent on connecting (NOPERM)';
  }
  return `Redis refuses this node's connection: it refused a command sent on connecting (${cutText(message.split('\n')[0] ?? '', 200)})`;
}
