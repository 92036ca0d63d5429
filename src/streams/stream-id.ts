/**
 * Redis stream entry IDs (`<ms>-<seq>`, https://redis.io/docs/latest/develop/data-types/streams/):
 * the positions of the broadcast stream (`bseq`) and of channel histories. Opaque to
 * clients, but ordered, and Pixiu compares them to send nothing twice.
 */

/** A stream entry ID, `<ms>-<seq>` with decimal parts. */
export const STREAM_ID_PATTERN = /^(\d{1,20})-(\d{1,20})$/;

/** The largest value of either part of a stream entry ID: 2^64 − 1 (Redis keeps both as unsigned 64-bit integers). */
const MAX_PART = 18446744073709551615n;

/** The largest stream entry ID; nothing can come after it. */
export const MAX_STREAM_ID = '18446744073709551615-18446744073709551615';

/**
 * True when `id` is a stream entry ID Redis accepts: `<ms>-<seq>`, each part a
 * decimal integer of at most 2^64 − 1. A part above that (`99999999999999999999-0`)
 * has the shape but Redis refuses it ("Invalid stream ID"), so it is malformed too.
 */
export function isStreamId(id: string): boolean {
  const m = STREAM_ID_PATTERN.exec(id);
  if (m === null) return false;
  // Up to 19 digits always fit; only 20-digit parts need the exact comparison.
  return (m[1] as string).length < 20 && (m[2] as string).length < 20
    ? true
    : BigInt(m[1] as string) <= MAX_PART && BigInt(m[2] as string) <= MAX_PART;
}

/**
 * True when a failed Redis call was refused for a stream ID ("ERR Invalid stream ID
 * specified as stream command argument", or "ERR invalid start ID for the interval"
 * for an exclusive start `(` at the largest ID): the caller's input cannot be used,
 * so it is INVALID_REQUEST, not an outage. `redisCall` wraps the reply as UNAVAILABLE with the
 * reply as its `cause`; both are looked at.
 */
export function isInvalidStreamIdReply(err: unknown): boolean {
  // ioredis's reply errors are not always `Error` instances: look at any `message`.
  let e: unknown = err;
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 3; depth++) {
    const { message, cause } = e as { message?: unknown; cause?: unknown };
    if (typeof message === 'string' && /Invalid stream ID|invalid start ID/i.test(message)) return true;
    e = cause;
  }
  return false;
}

/** `id` without leading zeros in either part (the form Redis answers with). */
export function normalizeStreamId(id: string): string {
  return id.replace(/(^|-)0+(?=\d)/g, '$1');
}

/**
 * Orders two stream IDs: negative when `a` < `b`, 0 when equal, positive when greater.
 * Both parts are compared as decimal integers of any length (they may exceed 2^53), so
 * leading zeros in a client's ID do not change its order.
 *
 * It allocates nothing and runs no regular expression (the first version ran two
 * `exec`s and four `replace`s per call, once per connection per broadcast, and showed
 * in the fan-out's profile): the IDs are validated where they enter
 * ({@link isStreamId}); here only their shape `<digits>-<digits>` is assumed.
 * @throws TypeError when either has no `-` (a programming error: validate at the edge)
 */
export function compareStreamIds(a: string, b: string): number {
  if (a === b) return 0;
  const da = a.indexOf('-');
  const db = b.indexOf('-');
  if (da < 0 || db < 0) throw new TypeError(`not stream ids: ${a}, ${b}`);
  return compareDecimal(a, 0, da, b, 0, db) || compareDecimal(a, da + 1, a.length, b, db + 1, b.length);
}

/** Orders the decimal numbers `a[s1, e1)` and `b[s2, e2)`. */
function compareDecimal(a: string, s1: number, e1: number, b: string, s2: number, e2: number): number {
  // Without leading zeros, a longer decimal is a larger number; equal lengths order
  // digit by digit.
  while (s1 < e1 - 1 && a.charCodeAt(s1) === 48) s1++;
  while (s2 < e2 - 1 && b.charCodeAt(s2) === 48) s2++;
  const len = e1 - s1;
  if (len !== e2 - s2) return len - (e2 - s2);
  for (let i = 0; i < len; i++) {
    const d = a.charCodeAt(s1 + i) - b.charCodeAt(s2 + i);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The stream ID just before `id` (`5-3` → `5-2`, `5-0` → `4-18446744073709551615`);
 * undefined for `0-0`, which has none. A loss that ends before an entry known to be
 * kept (a channel's refill: src/channels/channel-refill.ts) ends at this ID.
 */
export function precedingStreamId(id: string): string | undefined {
  const dash = id.indexOf('-');
  const ms = BigInt(id.slice(0, dash));
  const seq = BigInt(id.slice(dash + 1));
  if (seq > 0n) return `${ms}-${seq - 1n}`;
  return ms > 0n ? `${ms - 1n}-${MAX_PART}` : undefined;
}
