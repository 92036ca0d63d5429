/**
 * The broadcast stream `px:broadcast` (DESIGN.md §8): one capped Redis stream that
 * every node reads. Each entry carries the whole broadcast — MsgID, type, time, the
 * data as JSON text and the tag filter — so a node fans it out without a store read
 * (the content is also stored once in the message store, kind broadcast, for the
 * record). Its entry ID is the broadcast's `bseq`.
 */
import type { Redis } from 'ioredis';
import { invalid } from '../errors.js';
import type { Keys } from '../redis/keys.js';
import { onRedisClock, type RedisNow } from '../redis/redis-clock.js';
import { loadScripts, evalScript, type ScriptSpec } from '../redis/scripts.js';
import { broadcastKeys, keysCall, namedWrongType } from '../redis/wrong-type.js';
import { isStreamId } from '../streams/stream-id.js';
import { boundsOf, rangeWithBounds, STREAM_BOUNDS, type RawEntry, type StreamBounds } from '../streams/stream-bounds.js';
import { isTagFilter, type TagFilter } from './filter.js';

/** One broadcast as read from the stream. */
export interface BroadcastEntry {
  /** The `bseq`: the stream entry ID. */
  readonly id: string;
  /** The MsgID. */
  readonly msgId: string;
  readonly filter: TagFilter | undefined;
  /**
   * When the broadcast's `ttl` ends, ms since the epoch: past it, it is sent to no one
   * (a catch-up, or a node reading late). Undefined for an entry without one (written
   * before entries carried it): such an entry never lapses.
   */
  readonly expiresAt: number | undefined;
  /**
   * The `bcast` frame as UTF-8 bytes, serialised and encoded once per node (DESIGN.md
   * §8) and written as is to every matching socket: sent as a string, each socket
   * would encode it again (bench:broadcast measured the bytes ~10 % cheaper per frame).
   */
  readonly frame: Buffer;
}

/** What the broadcast stream retains, in bseqs (src/streams/stream-bounds.ts). */
export type BroadcastBounds = StreamBounds;

/** The broadcast scripts; each header documents KEYS, ARGV and reply. */
export const BROADCAST_SCRIPTS = {
  /** KEYS broadcast. Replies [first, last, max deleted] ("" for none): the streams' shared script. */
  bounds: STREAM_BOUNDS,
  /** KEYS broadcast, marker; ARGV cap, marker expiry (ms, "0" none), note, field, value, … Replies [bseq, note, before]. */
  publish: { file: new URL('./lua/broadcast-publish-2.lua', import.meta.url), numberOfKeys: 2 },
} as const satisfies Record<string, ScriptSpec>;

/**
 * Builds an entry (and its frame) from the raw reply; undefined when malformed: a field
 * missing, a time (`s`, `e`) that is no whole number of ms, data (`d`) that is not JSON
 * text, a filter (`f`) that is no tag filter. Such an entry (another program's, under
 * the prefix) is left out: logged by the node's reader, read past by a catch-up.
 */
export function parseBroadcastEntry([id, fields]: RawEntry): BroadcastEntry | undefined {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
  const { m, y, s, d, e } = f;
  if (m === undefined || y === undefined || s === undefined || d === undefined) return undefined;
  const expiresAt = e === undefined ? undefined : Number(e);
  if (expiresAt !== undefined && !Number.isSafeInteger(expiresAt)) return undefined;
  // Written into the frame as they are: a time that is no number ("ts":NaN) or data
  // that is no JSON ("data":hello) made a frame every matching client's JSON.parse
  // threw on (a reviewer's finding). Parsed once per entry read, not per connection.
  const ts = Number(s);
  if (!Number.isSafeInteger(ts) || !isJsonText(d)) return undefined;
  let filter: TagFilter | undefined;
  if (f.f) {
    try {
      filter = JSON.parse(f.f) as TagFilter;
    } catch {
      return undefined;
    }
    // Another writer's filter of another shape would throw in every connection's match.
    if (!isTagFilter(filter)) return undefined;
  }
  // The data is already JSON text: the frame is assembled around it, not re-encoded.
  const frame = Buffer.from(`{"t":"bcast","bseq":${JSON.stringify(id)},"id":${JSON.stringify(m)},"type":${JSON.stringify(y)},"ts":${ts},"data":${d}}`);
  return { id, msgId: m, filter, expiresAt, frame };
}

/** True when `text` is one JSON value (what a frame may hold as its `data`). */
function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** True when `entry`'s `ttl` has ended at `now` (ms since the epoch): it is sent to no one. */
export function isExpired(entry: BroadcastEntry, now: number): boolean {
  return entry.expiresAt !== undefined && entry.expiresAt <= now;
}

/** One page of the stream and its bounds, read as one snapshot ({@link BroadcastStream.rangeWithBounds}). */
export interface BroadcastPage {
  /** The entries read, oldest first, malformed ones left out. */
  readonly entries: BroadcastEntry[];
  /** IDs of the entries read that could not be parsed (left out of `entries`). */
  readonly malformed: string[];
  /** ID of the last entry read, malformed or not; undefined when none was. */
  readonly readUpTo: string | undefined;
  readonly bounds: BroadcastBounds;
}

/** A broadcast to append: what its stream entry carries. */
export interface BroadcastAppend {
  /** The MsgID. */
  readonly msgId: string;
  readonly type: string;
  /** Its time, ms since the epoch (the stored record's). */
  readonly ts: number;
  /** The data, already JSON-encoded. */
  readonly dataJson: string;
  readonly filter: TagFilter | undefined;
  /** When its `ttl` ends, ms since the epoch (the stored record's expiry). */
  readonly expiresAt: number;
}

/** What {@link BroadcastStream.publishOnce} answers. */
export interface OncePublished {
  /** Its bseq: the entry appended now, or the one appended first. */
  readonly bseq: string;
  /** True when it had been appended before (by an earlier attempt): nothing was appended now. */
  readonly before: boolean;
  /**
   * The tag filter of the append that counts, as filter.ts `filterKey` writes it: the
   * first one's when {@link before}, else this one's.
   */
  readonly filterKey: string;
}

/**
 * The broadcast stream. Methods reject with PixiuError UNAVAILABLE when Redis fails,
 * and INTERNAL naming the broadcast stream when its key (or a broadcast's marker) holds
 * another type than Pixiu writes there (src/redis/wrong-type.ts: no retry cures it).
 */
export class BroadcastStream {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #key: string;
  readonly #cap: string;
  /** Now by Redis's clock, ms: a marker's expiry is given on it. */
  readonly #redisNow: RedisNow;

  /**
   * @param cap entries retained (setting `broadcastStreamCap`)
   * @param redisNow now by Redis's clock, ms (the node registry's, NodeRegistry.now);
   *   default this machine's clock (`Date.now`), for a Redis on this machine
   */
  constructor(redis: Redis, keys: Keys, cap: number, redisNow: RedisNow = Date.now) {
    this.#redis = redis;
    this.#keys = keys;
    this.#key = keys.broadcast();
    this.#cap = String(cap);
    this.#redisNow = redisNow;
    loadScripts(redis, Object.values(BROADCAST_SCRIPTS));
  }

  /** The stream's key (for the node reader). */
  get key(): string {
    return this.#key;
  }

  /**
   * Appends a broadcast, trimming the stream to exactly the cap and recording the
   * highest ID trimmed (broadcast-publish-2.lua: a plain `XADD MAXLEN` leaves no trace
   * of what it trimmed, so a `gap` could not be told).
   * @returns its bseq
   */
  async publish(entry: BroadcastAppend): Promise<string> {
    const [bseq] = await this.#append(entry, '0', '');
    return bseq;
  }

  /**
   * Appends a broadcast once per MsgID (one sent with a `client_msg_id`, DESIGN.md §7):
   * as {@link publish}, and in the same script a marker keyed by the MsgID names its
   * bseq and filter until `expiresAt` (keys.ts `broadcastMarker`); when the marker is
   * there already — an earlier attempt appended it, even one whose reply was lost to a
   * command timeout — nothing is appended and the first bseq is answered.
   * `expiresAt` is by this machine's clock (the store's); Redis expires the marker by
   * its own, so it is given as the same moment on Redis's clock (redis-clock.ts): with
   * this machine's clock behind Redis's, the marker lapsed that much before the stored
   * broadcast, and a retry on another node then appended it a second time.
   * @param filterKey the filter as filter.ts `filterKey` writes it, kept in the marker
   */
  async publishOnce(entry: BroadcastAppend, filterKey: string): Promise<OncePublished> {
    // Never already past (set to no avail); the record lives at least as long.
    const at = String(onRedisClock(entry.expiresAt, this.#redisNow));
    const [bseq, note, before] = await this.#append(entry, at, filterKey);
    return { bseq, before: before === 1, filterKey: note };
  }

  /** Runs broadcast-publish-2.lua for `entry`; `at` the marker's expiry ("0": none), `note` its filter. */
  #append(entry: BroadcastAppend, at: string, note: string): Promise<[string, string, number]> {
    const fields = ['m', entry.msgId, 'y', entry.type, 's', String(entry.ts), 'd', entry.dataJson, 'e', String(entry.expiresAt)];
    if (entry.filter) fields.push('f', JSON.stringify(entry.filter));
    const marker = this.#keys.broadcastMarker(entry.msgId);
    return keysCall(this.#redis, broadcastKeys(this.#keys, at === '0' ? undefined : entry.msgId), 'publish',
      () => evalScript<[string, string, number]>(this.#redis, BROADCAST_SCRIPTS.publish, [this.#key, marker], [this.#cap, at, note, ...fields]));
  }

  /**
   * What the stream retains; nothing (every bound undefined, `maxDeleted` `0-0`) when
   * the stream does not exist.
   * @throws PixiuError INTERNAL when the key holds another type (stream-bounds-2.lua:
   *   not read as a missing stream); UNAVAILABLE when Redis fails
   */
  async bounds(): Promise<BroadcastBounds> {
    return boundsOf(await keysCall(this.#redis, broadcastKeys(this.#keys), 'read', () => evalScript<[string, string, string]>(this.#redis, BROADCAST_SCRIPTS.bounds, [this.#key], [])));
  }

  /**
   * `err`, a failure of a call on the stream's key made elsewhere (the node reader's
   * blocking `XREAD`), as this stream's own calls reject: Redis's `WRONGTYPE` becomes
   * the INTERNAL naming the broadcast stream and, in its cause, the key; anything else
   * is answered as it is.
   */
  named(err: unknown): Promise<unknown> {
    return namedWrongType(this.#redis, broadcastKeys(this.#keys), err, 'read');
  }

  /**
   * Up to `count` entries after `afterId` (exclusive), oldest first, and the stream's
   * {@link bounds}, read as one snapshot (MULTI/EXEC): whether the stream was trimmed
   * past `afterId` before this page was read is then known exactly.
   * A catch-up reads page after page while publishes trim the stream; bounds read apart
   * from the page would miss a trim between two pages, and the entries it removed would
   * be skipped without a `gap` (subscription.ts).
   * @throws PixiuError INVALID_REQUEST when `afterId` is not a stream ID; UNAVAILABLE when Redis fails;
   *   INTERNAL when the key holds another type
   */
  async rangeWithBounds(afterId: string, count: number): Promise<BroadcastPage> {
    if (!isStreamId(afterId)) throw invalid('last_bseq must be a stream id like 1700000000000-0');
    const { raw, bounds } = await keysCall(this.#redis, broadcastKeys(this.#keys), 'read', () => rangeWithBounds(this.#redis, this.#key, afterId, count));
    const entries: BroadcastEntry[] = [];
    const malformed: string[] = [];
    for (const r of raw) {
      const e = parseBroadcastEntry(r);
      if (e) entries.push(e);
      else malformed.push(r[0]);
    }
    return { entries, malformed, readUpTo: raw[raw.length - 1]?.[0], bounds };
  }
}
