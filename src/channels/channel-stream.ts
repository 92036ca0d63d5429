/**
 * Channel publications (DESIGN.md §8): live and at-most-once, through Redis Pub/Sub to
 * the nodes with subscribers, plus a small capped history stream per channel so `sub`
 * with `since` can catch up, dropped a while after the channel's last publication. A
 * publication's id is its history stream entry ID.
 *
 * A channel's key holding another type than Pixiu writes there (its history not a
 * stream, a publication's marker not a string: an operator's `SET`, another program
 * under the prefix) fails every call on it with Redis's `WRONGTYPE`, which no retry
 * cures: it is answered INTERNAL naming the channel, its cause naming the key
 * (src/redis/wrong-type.ts `channelKeys`), not UNAVAILABLE "retry later".
 */
import type { Redis } from 'ioredis';
import { invalid, PixiuError } from '../errors.js';
import { channelKeys, keysCall } from '../redis/wrong-type.js';
import type { Keys } from '../redis/keys.js';
import { loadScripts, evalScript, type ScriptSpec } from '../redis/scripts.js';
import type { Logger } from '../logger.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import { compareStreamIds, isInvalidStreamIdReply, isStreamId, MAX_STREAM_ID } from '../streams/stream-id.js';
import { rangeWithBounds, STREAM_BOUNDS, type RawEntry, type StreamBounds } from '../streams/stream-bounds.js';

/** History entries per read, for a `sub`'s catch-up and a refill after a reconnect. */
export const HISTORY_PAGE = 100;

/** The refusal of a malformed `since`. */
export const SINCE_MALFORMED = 'since must be a publication id like 1700000000000-0 (two integers of at most 2^64-1)';

/** `channel-publish-4.lua`: KEYS history, marker; ARGV cap, topic, payload, history ttl (ms), fingerprint ("" none). Replies [id, fingerprint, before]. */
const PUBLISH: ScriptSpec = { file: new URL('./lua/channel-publish-4.lua', import.meta.url), numberOfKeys: 2 };

/** One publication, ready to send. */
export interface ChannelEntry {
  /** Its id: the history stream entry ID. */
  readonly id: string;
  /** The `pub` frame, serialised once per node. */
  readonly frame: string;
}

/**
 * True when `payload` is what the publish script writes: a JSON object opening the
 * text, with exactly the fields `type` (a string), `ts` (a number) and `data`. Anything
 * else on a channel's topic or in its history was written by another program sharing
 * the Redis: `{}` made `{"t":"pub",…,"id":"…",}`, a frame that is no JSON, and fields
 * of its own (`"t"`) would have overridden the frame's (a reviewer's C4). Parsed once
 * per node for a live publication, once per read for a history entry.
 */
export function isPublicationPayload(payload: string): boolean {
  if (payload.charCodeAt(0) !== 123 /* { */) return false;
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return false;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const fields = value as Record<string, unknown>;
  return Object.keys(fields).length === 3 && typeof fields.type === 'string' && typeof fields.ts === 'number' && 'data' in fields;
}

/** Builds the `pub` frame around a payload `{"type":…,"ts":…,"data":…}` without re-encoding it. */
export function pubFrame(channel: string, id: string, payload: string): string {
  return `{"t":"pub","channel":${JSON.stringify(channel)},"id":${JSON.stringify(id)},${payload.slice(1)}`;
}

/**
 * Builds the `subscribed` frame that answers a `sub` (docs/protocol.md "Channels"):
 * `{"t":"subscribed","channel":…,"since":…}`, `since` the publication id after which
 * this connection receives the channel (`0-0`: every publication from now on).
 */
export function subscribedFrame(channel: string, since: string): string {
  return JSON.stringify({ t: 'subscribed', channel, since });
}

/** One page of a channel's history, read with what the history had trimmed then ({@link ChannelStream.range}). */
export interface HistoryPage {
  /** The publications read, oldest first (entries that are none left out). */
  readonly entries: ChannelEntry[];
  /** The ID of the last entry read, one left out included; undefined when none was read. */
  readonly readUpTo: string | undefined;
  /** The newest id the history had trimmed when the page was read; `0-0`: none (or no history). */
  readonly lastTrimmed: string;
}

/** What {@link ChannelStream.publishOnce} answers. */
export interface OncePublication {
  /** The publication's id: the one published now, or the one published first under the key. */
  readonly id: string;
  /** True when it was published before under the key (by an earlier attempt): nothing was published now. */
  readonly before: boolean;
  /** The content fingerprint of the publication that counts: the first one's when {@link before}. */
  readonly fingerprint: string;
}

/**
 * Channel publishing and history. Methods reject with PixiuError UNAVAILABLE when Redis
 * fails, INTERNAL naming the channel when one of its keys holds another type (see the
 * module comment).
 */
export class ChannelStream {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #cap: string;
  readonly #ttl: string;
  readonly #logger: Logger | undefined;
  readonly #malformedLog = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);

  /**
   * @param historyCap publications kept per channel for catch-up
   * @param historyTtlMs how long a channel's history is kept after its last
   *   publication, ms (setting `channelHistoryTtl`; docs/decisions.md, "Channels")
   * @param logger where a malformed history entry is logged (at warn); none: not logged
   */
  constructor(redis: Redis, keys: Keys, historyCap: number, historyTtlMs: number, logger?: Logger) {
    this.#redis = redis;
    this.#logger = logger;
    this.#keys = keys;
    this.#cap = String(historyCap);
    this.#ttl = String(historyTtlMs);
    loadScripts(redis, [PUBLISH, STREAM_BOUNDS]);
  }

  /**
   * Publishes to a channel.
   * @param dataJson the data, already JSON-encoded
   * @returns the publication's id
   */
  async publish(channel: string, type: string, ts: number, dataJson: string): Promise<string> {
    // No marker: its key is named (the script's second key) but not written.
    const [id] = await this.#publish(channel, type, ts, dataJson, '-', '');
    return id;
  }

  /**
   * Publishes to a channel once per `clientMsgId` (a producer's retry, DESIGN.md §7): as
   * {@link publish}, and in the same script a marker keyed by the channel and the key
   * names the id and `fingerprint`, expiring with the channel's history; when the
   * marker is there already — an earlier attempt published it, even one whose reply was
   * lost to a command timeout — nothing is published and the first id is answered.
   * @param fingerprint the content's (publication-fingerprint.ts), kept in the marker
   */
  async publishOnce(channel: string, type: string, ts: number, dataJson: string, clientMsgId: string, fingerprint: string): Promise<OncePublication> {
    const [id, first, before] = await this.#publish(channel, type, ts, dataJson, clientMsgId, fingerprint);
    return { id, before: before === 1, fingerprint: first };
  }

  /**
   * Runs channel-publish-4.lua; `fingerprint` "" asks for no marker. The script
   * fails before it writes anything on a history or marker of another type (its GET,
   * then its XADD): nothing was published, so the INTERNAL says to send it again.
   */
  #publish(channel: string, type: string, ts: number, dataJson: string, clientMsgId: string, fingerprint: string): Promise<[string, string, number]> {
    const payload = `{"type":${JSON.stringify(type)},"ts":${ts},"data":${dataJson}}`;
    const owner = channelKeys(channel, this.#keys, fingerprint === '' ? undefined : clientMsgId);
    return keysCall(this.#redis, owner, 'publish', () => evalScript<[string, string, number]>(this.#redis, PUBLISH,
      [this.#keys.channelHistory(channel), this.#keys.channelMarker(channel, clientMsgId)],
      [this.#cap, this.#keys.channelTopic(channel), payload, this.#ttl, fingerprint]));
  }

  /**
   * Up to `count` history entries after `afterId` (exclusive): the publications among
   * them, oldest first, and the ID of the last entry read (undefined: none), an entry
   * that is no publication (another writer's) included, so the next page starts after it.
   * An entry with a publication's field whose payload is none ({@link isPublicationPayload})
   * is left out too, and logged (each catch-up that reads it would log it again: at
   * most one line per 10 s, with how many were left out).
   *
   * Read in one MULTI with the history's bounds (stream-bounds-2.lua), as a broadcast
   * page is (BroadcastStream `rangeWithBounds`): `lastTrimmed` is the newest id the
   * history had trimmed when this page was read (`0-0`: none; channel-publish-4.lua
   * records it), so whether publications after `afterId` are gone is known exactly,
   * also between two pages while publishes trim the history.
   * @throws PixiuError INVALID_REQUEST when `afterId` is not a publication id;
   *   UNAVAILABLE when Redis fails; INTERNAL when the history key holds another type
   */
  async range(channel: string, afterId: string, count: number): Promise<HistoryPage> {
    if (!isStreamId(afterId)) throw invalid(SINCE_MALFORMED);
    // Nothing can follow the largest ID, and Redis refuses it as an exclusive start.
    if (compareStreamIds(afterId, MAX_STREAM_ID) === 0) return { entries: [], readUpTo: undefined, lastTrimmed: '0-0' };
    const key = this.#keys.channelHistory(channel);
    let read: { raw: RawEntry[]; bounds: StreamBounds };
    try {
      read = await keysCall(this.#redis, channelKeys(channel, this.#keys), 'read', () => rangeWithBounds(this.#redis, key, afterId, count));
    } catch (err) {
      // Redis refusing the ID is the client's input, not an outage (`(<max>-<max>` is one such).
      if (isInvalidStreamIdReply(err)) throw new PixiuError('INVALID_REQUEST', SINCE_MALFORMED, { cause: err });
      throw err;
    }
    const out: ChannelEntry[] = [];
    const { raw, bounds } = read;
    for (const [id, fields] of raw) {
      const payload = fields[1];
      if (fields[0] !== 'p' || payload === undefined) continue;
      if (isPublicationPayload(payload)) out.push({ id, frame: pubFrame(channel, id, payload) });
      else this.#malformed(channel, id);
    }
    return { entries: out, readUpTo: raw.at(-1)?.[0], lastTrimmed: bounds.maxDeleted };
  }

  #malformed(channel: string, id: string): void {
    const left = this.#malformedLog.take();
    if (left !== undefined) this.#logger?.warn({ channel, id, ...thinnedFields(left) }, 'malformed channel history entry skipped');
  }

  /**
   * The id of the channel's newest publication in its history; undefined when it has none.
   * @throws PixiuError UNAVAILABLE when Redis fails; INTERNAL when the history key holds another type
   */
  async newestId(channel: string): Promise<string | undefined> {
    const raw = await keysCall(this.#redis, channelKeys(channel, this.#keys), 'read', () =>
      this.#redis.xrevrange(this.#keys.channelHistory(channel), '+', '-', 'COUNT', '1')) as [string, string[]][];
    return raw[0]?.[0];
  }
}
