/**
 * The bytes of a `msg` frame (DESIGN.md §6), with the message's `data` encoded once
 * per node rather than once per recipient.
 *
 * One message posted to many online users goes out as one `msg` frame per connection,
 * and the frames differ only in `seq`, `room`, `redelivered` and `epoch`: serialised
 * whole for each (`JSON.stringify(frame)`, then UTF-8 encoded again by `ws`), 1,000
 * recipients of a 60 KB message cost 1,000 serialisations and encodings of the same
 * 60 KB, and their garbage; a black-box tester's run held the event loop for seconds
 * (docs/decisions.md, "Live delivery of one large message to many users"). Here the
 * `data`'s JSON is encoded to UTF-8 once and kept in a small node-wide cache keyed by
 * the message's MsgID: a message's `data` never changes once stored (records read from
 * the store are decoded from its bytes and deep-frozen; the record ingest offers to
 * local recipients holds the producer's own posted value, not frozen, which nothing
 * changes after ingest), so every recipient's frame of one MsgID carries the same
 * JSON, however many decoded copies of the record there are. Keys are small strings:
 * the cache holds what it counts (the bytes), never the decoded values. Each frame then
 * costs its few small fields and one copy of the bytes.
 *
 * The text is exactly `JSON.stringify(frame)`'s: the fields in the frame's own order,
 * each written by `JSON.stringify`, `data` where it stands among them. A `data` that
 * cannot be serialised throws the serialiser's error, for every recipient, as
 * `JSON.stringify(frame)` did. A failure that does not depend on the call is cached
 * like the bytes (a BigInt, a cycle: a TypeError); a RangeError is not (nesting past
 * V8's stack: whether it throws depends on how deep the stack is at the call, so a
 * later send tries again).
 */
import { LRUCache } from 'lru-cache';
import type { MsgFrame } from './frames.js';

/**
 * Most bytes of encoded `data` the node keeps, bytes: the cache only has to outlive one
 * message's fan-out (and its redelivery rounds, while the record is read again), so a
 * few hundred frames' worth of the largest message (64 KiB by default) is plenty.
 */
export const ENCODED_DATA_CACHE_BYTES = 16 * 1024 * 1024;

/** What an entry costs besides its bytes (the LRU's slots, its MsgID key, the Buffer's object), bytes. */
const ENTRY_OVERHEAD_BYTES = 128;

/** What a cached failure is counted as (the error object, its message and stack strings), bytes. */
const FAILURE_BYTES = 1024;

/**
 * Data values below this many JSON bytes are not cached: encoding them again is as
 * cheap as the look-up (a chat message's `data`).
 */
const MIN_CACHED_BYTES = 1024;

/** The encoded JSON of a `data` value, or the serialiser's error. */
type Encoded = Buffer | { readonly failed: unknown };

/**
 * Node-wide, by MsgID: every session of the node shares it (a message's recipients are
 * many users). Sized by what it holds: the bytes (or a failure) and a small key.
 */
const encodedData = new LRUCache<string, Encoded>({
  maxSize: ENCODED_DATA_CACHE_BYTES,
  sizeCalculation: (v) => ENTRY_OVERHEAD_BYTES + (Buffer.isBuffer(v) ? v.length : FAILURE_BYTES),
});

/**
 * The UTF-8 JSON of message `id`'s `data`, encoded once per MsgID while cached.
 * @returns undefined when `JSON.stringify` writes nothing for it (undefined, a function):
 *   the field is left out, as `JSON.stringify(frame)` leaves it out
 * @throws what `JSON.stringify(data)` throws (cached unless a RangeError: a message that
 *   failed for its value fails again at once)
 */
function encodeData(id: string, data: unknown): Buffer | undefined {
  const cached = encodedData.get(id);
  if (cached !== undefined) {
    if (Buffer.isBuffer(cached)) return cached;
    throw cached.failed;
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(data) as string | undefined;
  } catch (err) {
    // A stack overflow depends on the caller's stack, not on the value alone.
    if (!(err instanceof RangeError)) encodedData.set(id, { failed: err });
    throw err;
  }
  if (json === undefined) return undefined;
  const bytes = Buffer.from(json);
  if (bytes.length >= MIN_CACHED_BYTES) encodedData.set(id, bytes);
  return bytes;
}

/** The cache's size as it counts it (bytes) and its entries: for tests. */
export function encodedDataCacheStats(): { size: number; entries: number } {
  return { size: encodedData.calculatedSize, entries: encodedData.size };
}

/**
 * The UTF-8 text of a `msg` frame, byte for byte `JSON.stringify(frame)`'s, its `data`
 * encoded once per node (see the module's comment).
 * @throws what `JSON.stringify(frame.data)` throws: the frame cannot be sent (the
 *   session sends a `gap` of its seq instead, src/delivery/send-frame.ts)
 */
export function msgFrameBytes(frame: MsgFrame): Buffer {
  let head = '{';
  let tail = '';
  let data: Buffer | undefined;
  let members = 0;
  for (const key of Object.keys(frame)) {
    if (key === 'data') {
      data = encodeData(frame.id, frame.data);
      if (data === undefined) continue;
      head += `${members++ > 0 ? ',' : ''}"data":`;
      continue;
    }
    const json = JSON.stringify((frame as unknown as Record<string, unknown>)[key]) as string | undefined;
    if (json === undefined) continue;
    const member = `${members++ > 0 ? ',' : ''}${JSON.stringify(key)}:${json}`;
    if (data === undefined) head += member;
    else tail += member;
  }
  tail += '}';
  const headBytes = Buffer.byteLength(head);
  const dataBytes = data?.length ?? 0;
  const out = Buffer.allocUnsafe(headBytes + dataBytes + Buffer.byteLength(tail));
  out.write(head, 0);
  data?.copy(out, headBytes);
  out.write(tail, headBytes + dataBytes);
  return out;
}
