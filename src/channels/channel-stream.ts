/**
 * Channel publications (DESIGN.md §8): live and at-most-once, through Redis Pub/Sub to
 * the nodes with subscribers, plus a small capped history stream per channel so `sub`
 * with `since` can catch up, dropped a while after the channel's last publication. A
 * publication's id is its history stream entry ID.
 */
import type { Redis, Result } from 'ioredis';
import { invalid, PixiuError } from '../errors.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { defineScripts, type ScriptSpec } from '../redis/scripts.js';
import { compareStreamIds, isInvalidStreamIdReply, isStreamId, MAX_STREAM_ID } from '../streams/stream-id.js';

/** The refusal of a malformed `since`. */
export const SINCE_MALFORMED = 'since must be a publication id like 1700000000000-0 (two integers of at most 2^64-1)';

const PUBLISH: ScriptSpec = {
  command: 'pxChannelPublishV2', file: new URL('./lua/channel-publish-2.lua', import.meta.url), numberOfKeys: 1, readOnly: false,
};

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** `channel-publish-2.lua`: KEYS history; ARGV cap, topic, payload, history ttl (ms). Returns the id. */
    pxChannelPublishV2(history: string, cap: string, topic: string, payload: string, ttlMs: string): Result<string, Context>;
  }
}

/** One publication, ready to send. */
export interface ChannelEntry {
  /** Its id: the history stream entry ID. */
  readonly id: string;
  /** The `pub` frame, serialised once per node. */
  readonly frame: string;
}

/** Builds the `pub` frame around a payload `{"type":…,"ts":…,"data":…}` without re-encoding it. */
export function pubFrame(channel: string, id: string, payload: string): string {
  return `{"t":"pub","channel":${JSON.stringify(channel)},"id":${JSON.stringify(id)},${payload.slice(1)}`;
}

/** Channel publishing and history. Methods reject with PixiuError UNAVAILABLE when Redis fails. */
export class ChannelStream {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #cap: string;
  readonly #ttl: string;

  /**
   * @param historyCap publications kept per channel for catch-up
   * @param historyTtlMs how long a channel's history is kept after its last
   *   publication, ms (setting `channelHistoryTtl`; docs/decisions.md, "Channels")
   */
  constructor(redis: Redis, keys: Keys, historyCap: number, historyTtlMs: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#cap = String(historyCap);
    this.#ttl = String(historyTtlMs);
    defineScripts(redis, [PUBLISH]);
  }

  /**
   * Publishes to a channel.
   * @param dataJson the data, already JSON-encoded
   * @returns the publication's id
   */
  async publish(channel: string, type: string, ts: number, dataJson: string): Promise<string> {
    const payload = `{"type":${JSON.stringify(type)},"ts":${ts},"data":${dataJson}}`;
    return redisCall(() => this.#redis.pxChannelPublishV2(
      this.#keys.channelHistory(channel), this.#cap, this.#keys.channelTopic(channel), payload, this.#ttl));
  }

  /**
   * Up to `count` publications after `afterId` (exclusive), oldest first.
   * @throws PixiuError INVALID_REQUEST when `afterId` is not a publication id
   */
  async range(channel: string, afterId: string, count: number): Promise<ChannelEntry[]> {
    if (!isStreamId(afterId)) throw invalid(SINCE_MALFORMED);
    // Nothing can follow the largest ID, and Redis refuses it as an exclusive start.
    if (compareStreamIds(afterId, MAX_STREAM_ID) === 0) return [];
    let raw: [string, string[]][];
    try {
      raw = await redisCall(() =>
        this.#redis.xrange(this.#keys.channelHistory(channel), `(${afterId}`, '+', 'COUNT', String(count))) as [string, string[]][];
    } catch (err) {
      // Redis refusing the ID is the client's input, not an outage (`(<max>-<max>` is one such).
      if (isInvalidStreamIdReply(err)) throw new PixiuError('INVALID_REQUEST', SINCE_MALFORMED, { cause: err });
      throw err;
    }
    const out: ChannelEntry[] = [];
    for (const [id, fields] of raw) {
      const payload = fields[1];
      if (fields[0] === 'p' && payload !== undefined) out.push({ id, frame: pubFrame(channel, id, payload) });
    }
    return out;
  }

  /** The id of the channel's newest publication in its history; undefined when it has none. */
  async newestId(channel: string): Promise<string | undefined> {
    const raw = await redisCall(() =>
      this.#redis.xrevrange(this.#keys.channelHistory(channel), '+', '-', 'COUNT', '1')) as [string, string[]][];
    return raw[0]?.[0];
  }
}
