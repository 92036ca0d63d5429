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

/**
 * Orders two stream IDs: negative when `a` < `b`, 0 when equal, positive when greater.
 * Both parts are compared as integers (they may exceed 2^53, so as BigInt when long).
 * @throws TypeError when either is not a stream ID (a programming error: validate at the edge)
 */
export function compareStreamIds(a: string, b: string): number {
  const ma = STREAM_ID_PATTERN.exec(a);
  const mb = STREAM_ID_PATTERN.exec(b);
  if (!ma || !mb) throw new TypeError(`not stream ids: ${a}, ${b}`);
  return comparePart(ma[1] as string, mb[1] as string) || comparePart(ma[2] as string, mb[2] as string);
}

function comparePart(a: string, b: string): number {
  // Decimal strings without leading zeros order by length, then lexicographically.
  const x = a.replace(/^0+(?=\d)/, '');
  const y = b.replace(/^0+(?=\d)/, '');
  if (x.length !== y.length) return x.length - y.length;
  return x < y ? -1 : x > y ? 1 : 0;
}
