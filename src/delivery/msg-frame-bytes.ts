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
 * the data value itself (records read from the store are deep-frozen and shared with
 * its read cache, so every recipient's frame holds the same object; ingest hands every
 * local recipient the one record it stored); each frame then costs its few small
 * fields and one copy of the bytes.
 *
 * The text is exactly `JSON.stringify(frame)`'s: the fields in the frame's own order,
 * each written by `JSON.stringify`, `data` where it stands among them. A `data` that
 * cannot be serialised (nested deeper than V8's stack, a BigInt) throws the
 * serialiser's error, for every recipient, as `JSON.stringify(frame)` did, without
 * trying again: the failure is cached like the bytes.
 */
import { LRUCache } from 'lru-cache';
import type { MsgFrame } from './frames.js';

/**
 * Most bytes of encoded `data` the node keeps, bytes: the cache only has to outlive one
 * message's fan-out (and its redelivery rounds, while the record is read again), so a
 * few hundred frames' worth of the largest message (64 KiB by default) is plenty.
 */
export const ENCODED_DATA_CACHE_BYTES = 16 * 1024 * 1024;

/** What an entry costs besides its bytes (the LRU's slots, the Buffer's object), bytes. */
const ENTRY_OVERHEAD_BYTES = 128;

/**
 * Data values below this many JSON bytes are not cached: encoding them again is as
 * cheap as the look-up (a chat message's `data`).
 */
const MIN_CACHED_BYTES = 1024;

/** The encoded JSON of a `data` value, or the serialiser's error. */
type Encoded = Buffer | { readonly failed: unknown };

/** Node-wide: every session of the node shares it (a message's recipients are many users). */
const encodedData = new LRUCache<object | string, Encoded>({
  maxSize: ENCODED_DATA_CACHE_BYTES,
  sizeCalculation: (v) => ENTRY_OVERHEAD_BYTES + (Buffer.isBuffer(v) ? v.length : 0),
});

/**
 * The UTF-8 JSON of `data`, encoded once per value while cached.
 * @returns undefined when `JSON.stringify` writes nothing for it (undefined, a function):
 *   the field is left out, as `JSON.stringify(frame)` leaves it out
 * @throws what `JSON.stringify(data)` throws (cached: a value that failed fails again at once)
 */
function encodeData(data: unknown): Buffer | undefined {
  const key = typeof data === 'object' && data !== null ? data : typeof data === 'string' && data.length >= MIN_CACHED_BYTES ? data : undefined;
  const cached = key === undefined ? undefined : encodedData.get(key);
  if (cached !== undefined) {
    if (Buffer.isBuffer(cached)) return cached;
    throw cached.failed;
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(data) as string | undefined;
  } catch (err) {
    if (key !== undefined) encodedData.set(key, { failed: err });
    throw err;
  }
  if (json === undefined) return undefined;
  const bytes = Buffer.from(json);
  if (key !== undefined && bytes.length >= MIN_CACHED_BYTES) encodedData.set(key, bytes);
  return bytes;
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
      data = encodeData(frame.data);
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
