/**
 * Redis stream entry IDs (`<ms>-<seq>`, https://redis.io/docs/latest/develop/data-types/streams/):
 * the positions of the broadcast stream (`bseq`) and of channel histories. Opaque to
 * clients, but ordered, and Pixiu compares them to send nothing twice.
 */

/** A stream entry ID, `<ms>-<seq>` with decimal parts. */
export const STREAM_ID_PATTERN = /^(\d{1,20})-(\d{1,20})$/;

/** True when `id` is a well-formed stream entry ID. */
export function isStreamId(id: string): boolean {
  return STREAM_ID_PATTERN.test(id);
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
