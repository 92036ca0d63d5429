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
 * costs its few small fields and one copy of the bytes. The first frame of a message
 * on the node is `JSON.stringify(frame)` whole, its `data`'s bytes cut from it for the
 * cache; so is every frame of a message whose `data` is too small to cache (most
 * messages: no work is spent on a cache that would not hold them).
 *
 * The text is exactly `JSON.stringify(frame)`'s: the fields in the frame's own order,
 * each written by `JSON.stringify`, `data` where it stands among them. A `data` that
 * cannot be serialised throws the serialiser's error, for every recipient, as
 * `JSON.stringify(frame)` did. A failure that does not depend on the call is cached
 * like the bytes (a BigInt, a cycle: a TypeError); a RangeError is not (nesting past
 * V8's stack: whether it throws depends on how deep the stack is at the call, so a
 * later send tries again).
 *
 * A frame sized for a page's byte cut (`msgFrameSize`, connection-state.ts
 * `deliverPage`) is sent right after (session.ts runs the machine's `send` effects with
 * the very frame object sized, send-frame.ts). When sizing had to write the frame — a
 * `data` too large for the bound and seen first, or one whose bytes are cached — it
 * keeps what it wrote for that frame object (a `WeakMap`), and the send takes it
 * instead of writing the frame again: one `JSON.stringify` per such frame, not two (a
 * `data` of ~340 – 1,000 characters: too large for the bound, too small to cache), and
 * one build of the fields around cached bytes, not two. The bytes are taken only while
 * the frame's own fields are still the values sized (a first `msg` after a `null` epoch
 * is given its `epoch` after the page is sized, connection-state.ts `tellEpoch`):
 * otherwise, or for a copy of the frame, the send writes it anew. Only written bytes are
 * kept: a frame that cannot be serialised fails at its send as before.
 */
import { LRUCache } from 'lru-cache';
import type { GapFrame, MsgFrame } from './frames.js';

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

/** The cache's size as it counts it (bytes) and its entries: for tests. */
export function encodedDataCacheStats(): { size: number; entries: number } {
  return { size: encodedData.calculatedSize, entries: encodedData.size };
}

/** `msg` frames written in this process, sized or sent (see {@link frameWrites}). */
const writes = { whole: 0, around: 0 };

/**
 * How many `msg` frames this process wrote to bytes, sized or sent: `whole` by
 * `JSON.stringify(frame)`, `around` as their small fields around cached `data` bytes
 * (each count only rises). A write that threw (a `data` that cannot be serialised)
 * produced no bytes and is not counted. For tests: a frame sized and then sent is
 * written once.
 */
export function frameWrites(): { whole: number; around: number } {
  return { ...writes };
}

/** A frame's bytes written when it was sized, with its own fields' values then (`keys[i]` → `values[i]`). */
interface SizedFrame {
  readonly bytes: Buffer;
  readonly keys: readonly string[];
  readonly values: readonly unknown[];
}

/**
 * The bytes `msgFrameSize` wrote for a frame object, for its send (see the module's
 * comment); a frame sized and never sent (its connection closed first) is dropped
 * with it.
 */
const sizedFrames = new WeakMap<MsgFrame, SizedFrame>();

/** Keeps the bytes written for `frame` while sizing it, for its send. */
function keepSized(frame: MsgFrame, bytes: Buffer): Buffer {
  const keys = Object.keys(frame);
  sizedFrames.set(frame, { bytes, keys, values: keys.map((k) => (frame as unknown as Record<string, unknown>)[k]) });
  return bytes;
}

/**
 * The bytes kept for `frame` when it was sized, taken (once), or undefined: none kept,
 * or a field of the frame changed since — a member added, removed, reordered or given
 * another value (its `data` compared by identity: a message's data never changes).
 */
function takeSized(frame: MsgFrame): Buffer | undefined {
  const kept = sizedFrames.get(frame);
  if (kept === undefined) return undefined;
  sizedFrames.delete(frame);
  const keys = Object.keys(frame);
  if (keys.length !== kept.keys.length) return undefined;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    if (key !== kept.keys[i] || (frame as unknown as Record<string, unknown>)[key] !== kept.values[i]) return undefined;
  }
  return kept.bytes;
}

/**
 * The frame's text around its `data`, the frame's small fields each written by
 * `JSON.stringify` in the frame's own order: `head` up to and with `"data":`, `tail`
 * from the member after `data` to the closing brace. A frame without a `data` key has
 * its members all in `head` (no `"data":`) and `tail` is `}`.
 */
function around(frame: MsgFrame): { head: string; tail: string } {
  let head = '{';
  let tail = '';
  let members = 0;
  let afterData = false;
  for (const key of Object.keys(frame)) {
    if (key === 'data') {
      head += `${members++ > 0 ? ',' : ''}"data":`;
      afterData = true;
      continue;
    }
    const json = JSON.stringify((frame as unknown as Record<string, unknown>)[key]) as string | undefined;
    if (json === undefined) continue;
    const member = `${members++ > 0 ? ',' : ''}${JSON.stringify(key)}:${json}`;
    if (afterData) tail += member;
    else head += member;
  }
  return { head, tail: `${tail}}` };
}

/**
 * The first frame of a message on the node (or any frame of one whose `data` is not
 * cached: under {@link MIN_CACHED_BYTES}, or not serialisable to anything), written
 * whole by `JSON.stringify`; its `data`'s bytes, cut from it, are cached when they are
 * {@link MIN_CACHED_BYTES} or more. A frame under that size is sent as it is, with no
 * more work: most messages. (Measured on the 2-core VM, CPU time per frame: `data` of
 * 42 JSON characters 3.3 – 4.3 µs → 1.6 – 1.8, of 290 characters 4.9 – 5.7 → 2.7 – 3.4,
 * against writing every frame around its `data`; of about 1 KiB and of 60 KB, first
 * or later frames, the same within the noise.)
 * @throws what `JSON.stringify(frame)` throws (its `data`: the other fields are
 *   strings and numbers), cached unless a RangeError
 */
function firstFrameBytes(frame: MsgFrame): Buffer {
  let text: string;
  try {
    text = JSON.stringify(frame);
  } catch (err) {
    // A stack overflow depends on the caller's stack, not on the value alone.
    if (!(err instanceof RangeError)) encodedData.set(frame.id, { failed: err });
    throw err;
  }
  writes.whole++;
  const out = Buffer.from(text);
  if (out.length < MIN_CACHED_BYTES) return out;
  const { head, tail } = around(frame);
  const headBytes = Buffer.byteLength(head);
  const dataBytes = out.length - headBytes - Buffer.byteLength(tail);
  // Without `"data":` where `head` ends, `data` wrote nothing (undefined, a function):
  // nothing to cache. A copy: `out` may be a slice of Buffer's shared pool.
  if (dataBytes >= MIN_CACHED_BYTES && text.startsWith(head) && text.endsWith(tail)) {
    encodedData.set(frame.id, Buffer.from(out.subarray(headBytes, headBytes + dataBytes)));
  }
  return out;
}

/**
 * The UTF-8 text of a `msg` frame, byte for byte `JSON.stringify(frame)`'s, its `data`
 * encoded once per node (see the module's comment).
 * @throws what `JSON.stringify(frame.data)` throws: the frame cannot be sent (the
 *   session sends a `gap` of its seq instead, src/delivery/send-frame.ts)
 */
export function msgFrameBytes(frame: MsgFrame): Buffer {
  const sized = takeSized(frame);
  if (sized !== undefined) return sized;
  const cached = encodedData.get(frame.id);
  if (cached === undefined) return firstFrameBytes(frame);
  if (!Buffer.isBuffer(cached)) throw cached.failed;
  return aroundCached(frame, cached);
}

/** `frame` written as its small fields around its `data`'s cached bytes `cached`. */
function aroundCached(frame: MsgFrame, cached: Buffer): Buffer {
  const { head, tail } = around(frame);
  writes.around++;
  const headBytes = Buffer.byteLength(head);
  const out = Buffer.allocUnsafe(headBytes + cached.length + Buffer.byteLength(tail));
  out.write(head, 0);
  cached.copy(out, headBytes);
  out.write(tail, headBytes + cached.length);
  return out;
}

/**
 * Bytes a frame's members other than `data` take at most, besides its `type`, `from`,
 * `room` and `epoch` strings: the names and punctuation, `seq`, `id`, `ts`, `redelivered`.
 */
const FRAME_FIELDS_BYTES = 128;

/** Most values {@link jsonBytesBound} looks at before it gives up (and the frame is encoded instead). */
const BOUND_VALUES = 64;

/**
 * A bound on the UTF-8 bytes of `JSON.stringify(value)` found without writing it (3
 * bytes per UTF-16 unit of a string, 24 per number or literal), or undefined once it
 * reaches `limit` or has looked at {@link BOUND_VALUES} values. Escapes of control
 * characters (up to 6 bytes each) are not counted: an estimate, not a guarantee.
 */
function jsonBytesBound(value: unknown, limit: number): number | undefined {
  let total = 0;
  let seen = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (++seen > BOUND_VALUES) return undefined;
    if (typeof v === 'string') total += 3 * v.length + 2;
    else if (v === null || typeof v !== 'object') total += 24;
    else if (Array.isArray(v)) {
      if (v.length > BOUND_VALUES) return undefined;
      total += 2 + v.length;
      for (const x of v) stack.push(x);
    } else {
      total += 2;
      // Own enumerable keys, as JSON.stringify writes (a JSON value has no others).
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        total += 3 * k.length + 4;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
    if (total >= limit) return undefined;
  }
  return total;
}

/** A WebSocket frame's header from the server (unmasked) before `payload` bytes (RFC 6455 §5.2), bytes. */
function withHeader(payload: number): number {
  return payload + (payload < 126 ? 2 : payload < 65_536 ? 4 : 10);
}

/**
 * About how many bytes a socket queues for `msgFrameBytes(frame)`, its WebSocket header
 * included, for cutting a page by bytes (connection-state.ts `deliverPage`): exact when
 * the node has the `data` encoded (cached) or it is large and seen first — the frame
 * written now, and kept for its send (the module's comment), which does not write it
 * again — and for a small one (a bound under 1 KiB) a bound found without encoding it.
 * A frame that cannot be serialised counts as its small members (it goes out as a
 * `gap`). Never throws.
 */
export function msgFrameSize(frame: MsgFrame): number {
  const fields = FRAME_FIELDS_BYTES + 3 * (frame.type.length + (frame.from?.length ?? 0) + (frame.room?.length ?? 0) + (frame.epoch?.length ?? 0));
  const cached = encodedData.get(frame.id);
  if (cached !== undefined) {
    if (!Buffer.isBuffer(cached)) return fields;
    return withHeader(keepSized(frame, aroundCached(frame, cached)).length);
  }
  const bound = jsonBytesBound(frame.data, MIN_CACHED_BYTES);
  if (bound !== undefined) return withHeader(fields + bound);
  try {
    return withHeader(keepSized(frame, firstFrameBytes(frame)).length);
  } catch {
    return fields;
  }
}

/**
 * The bytes a socket queues for a `gap` frame, its WebSocket header included, exactly
 * (its JSON as the session writes it: a few small fields), for cutting a page by bytes
 * (connection-state.ts `deliverPage`). Never throws.
 */
export function gapFrameSize(frame: GapFrame): number {
  return withHeader(Buffer.byteLength(JSON.stringify(frame)));
}
