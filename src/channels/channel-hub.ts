/**
 * This node's channel subscriptions (DESIGN.md §8): which local connections follow
 * which channel. The node subscribes to a channel's Redis Pub/Sub topic while it has
 * at least one local subscriber and drops it when the last one leaves. A publication
 * arriving from Redis is turned into one `pub` frame and offered to each subscriber.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { pubFrame, type ChannelEntry } from './channel-stream.js';
import { outageFields } from '../errors.js';
import { isStreamId } from '../streams/stream-id.js';

/** A local subscriber of a channel. */
export interface ChannelSubscriber {
  offerPub(channel: string, entry: ChannelEntry): void;
}

/** The node's channel subscriptions. */
export class ChannelHub {
  readonly #subscriber: Redis;
  readonly #keys: Keys;
  readonly #logger: Logger;
  /** channel → its local subscribers, and the SUBSCRIBE that the first of them sent. */
  readonly #channels = new Map<string, { subs: Set<ChannelSubscriber>; ready: Promise<unknown> }>();
  /** Pub/Sub topic → channel. */
  readonly #topics = new Map<string, string>();
  /**
   * Topic → channel, for topics nobody here follows whose UNSUBSCRIBE failed (Redis
   * was unreachable). ioredis re-subscribes every topic it still counts when it
   * reconnects, so these are unsubscribed again once the connection is back.
   */
  readonly #stale = new Map<string, string>();

  /** @param subscriber a connection in subscriber mode (shared with the node bus) */
  constructor(subscriber: Redis, keys: Keys, logger: Logger) {
    this.#subscriber = subscriber;
    this.#keys = keys;
    this.#logger = logger;
    subscriber.on('message', (topic: string, text: string) => this.#onMessage(topic, text));
    // ioredis emits `ready` on the tick after it re-sent its SUBSCRIBEs, so these
    // UNSUBSCRIBEs reach Redis after them.
    subscriber.on('ready', () => {
      this.#resubscribe();
      this.#dropStale();
    });
  }

  /** Channels with local subscribers. */
  get channels(): readonly string[] {
    return [...this.#channels.keys()];
  }

  /**
   * Adds a local subscriber; the first one subscribes the node to the topic, the
   * others wait for that same subscription. The subscriber is registered at once, so
   * a {@link leave} that comes while the SUBSCRIBE is in flight finds it (and, being
   * the last, sends the UNSUBSCRIBE after it): the node is never left subscribed to a
   * channel nobody follows, not even when the SUBSCRIBE fails or times out. When this
   * resolves the subscriber may already have left; the caller knows whether it did.
   * @throws PixiuError UNAVAILABLE when Redis fails (the subscriber is not added)
   */
  async join(channel: string, sub: ChannelSubscriber): Promise<void> {
    const topic = this.#keys.channelTopic(channel);
    let state = this.#channels.get(channel);
    if (state === undefined) {
      this.#stale.delete(topic);
      this.#topics.set(topic, channel);
      state = { subs: new Set(), ready: redisCall(() => this.#subscriber.subscribe(topic)) };
      this.#channels.set(channel, state);
    }
    state.subs.add(sub);
    try {
      await state.ready;
    } catch (err) {
      state.subs.delete(sub);
      if (this.#channels.get(channel) === state) {
        this.#channels.delete(channel);
        this.#topics.delete(topic);
        // A SUBSCRIBE that timed out may still reach Redis and take effect: undone by
        // an UNSUBSCRIBE after it on the same connection (or once Redis is back).
        void this.#unsubscribe(topic, channel);
      }
      throw err;
    }
  }

  /**
   * Waits until every Pub/Sub message Redis wrote to the node's subscriber connection
   * before now has been offered to the subscribers: a PING on that connection, whose
   * reply Redis writes after them (one socket, in order). Call it after a read on the
   * command connection to know that the live copies of the publications the read saw
   * are already here, however far the subscriber socket lags (a burst backing it up):
   * docs/decisions.md "Channels". One round trip; single Redis only (on a Redis
   * Cluster a publication's PUBLISH reaches this shard over the cluster bus, which a
   * PING does not order).
   * @throws PixiuError UNAVAILABLE when the subscriber connection is down or times out
   */
  async barrier(): Promise<void> {
    await redisCall(() => this.#subscriber.ping());
  }

  /** Removes a local subscriber; the last one unsubscribes the node. Never rejects. */
  async leave(channel: string, sub: ChannelSubscriber): Promise<void> {
    const state = this.#channels.get(channel);
    if (!state?.subs.delete(sub) || state.subs.size > 0) return;
    this.#channels.delete(channel);
    const topic = this.#keys.channelTopic(channel);
    this.#topics.delete(topic);
    await this.#unsubscribe(topic, channel);
  }

  /** Unsubscribes the node from a topic; on failure it is retried when Redis is back. Never rejects. */
  async #unsubscribe(topic: string, channel: string): Promise<void> {
    try {
      await redisCall(() => this.#subscriber.unsubscribe(topic));
    } catch (err) {
      this.#stale.set(topic, channel);
      this.#logger.warn({ ...outageFields(err), channel }, 'channel unsubscribe failed; retried when redis is back');
    }
  }

  /**
   * The subscriber (re)connected: subscribes again to every followed channel. ioredis
   * re-subscribes on its own, but one that fails (the connection dropped again) is
   * forgotten, and the followers would get nothing more; SUBSCRIBE to a topic already
   * followed is a no-op.
   */
  #resubscribe(): void {
    const topics = [...this.#topics.keys()];
    if (topics.length === 0) return;
    redisCall(() => this.#subscriber.subscribe(...topics))
      .catch((err: unknown) => this.#logger.warn(outageFields(err), 'channel re-subscribe failed; retried on the next reconnect'));
  }

  /** The subscriber (re)connected: drops the topics left subscribed while it was down. */
  #dropStale(): void {
    const stale = [...this.#stale];
    this.#stale.clear();
    for (const [topic, channel] of stale) {
      if (!this.#topics.has(topic)) void this.#unsubscribe(topic, channel);
    }
  }

  #onMessage(topic: string, text: string): void {
    const channel = this.#topics.get(topic);
    if (channel === undefined) return;
    const bar = text.indexOf('|');
    const id = bar > 0 ? text.slice(0, bar) : '';
    // Anything that can PUBLISH on this Redis reaches here: an id that is no stream ID
    // made the followers' id comparison throw inside ioredis's event (an uncaught
    // exception, the end of the process), and a payload that is no JSON object made a
    // broken `pub` frame.
    if (!isStreamId(id) || text.charCodeAt(bar + 1) !== 123 /* { */) {
      this.#logger.warn({ channel }, 'malformed channel publication ignored');
      return;
    }
    const entry: ChannelEntry = { id, frame: pubFrame(channel, id, text.slice(bar + 1)) };
    for (const sub of this.#channels.get(channel)?.subs ?? []) sub.offerPub(channel, entry);
  }
}
