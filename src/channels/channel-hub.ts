/**
 * This node's channel subscriptions (DESIGN.md §8): which local connections follow
 * which channel. The node subscribes to a channel's Redis Pub/Sub topic while it has
 * at least one local subscriber and drops it when the last one leaves. A publication
 * arriving from Redis is turned into one `pub` frame and offered to each subscriber.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { isPublicationPayload, pubFrame, type ChannelEntry, type ChannelStream } from './channel-stream.js';
import { earliestPosition, Hold, holdLoss, readHistory, REFILL_GIVE_UP_MS, REFILL_RETRY_MS, refillLoss, type RefillPlan } from './channel-refill.js';
import { outageFields } from '../errors.js';
import { isWrongTypeFailure } from '../redis/wrong-type.js';
import { MAX_CATCH_UP_QUEUE, type LostRange } from '../streams/follower.js';
import { compareStreamIds, isStreamId } from '../streams/stream-id.js';

/** A local subscriber of a channel. */
export interface ChannelSubscriber {
  /** A live publication, newer than every one offered before. */
  offerPub(channel: string, entry: ChannelEntry): void;
  /**
   * A publication offered by a refill after the subscriber connection came back
   * ({@link ChannelHub}): it may be one this subscriber was sent already (then it is
   * not sent again). Offered in id order, before the live ones newer than it.
   */
  offerRecovered(channel: string, entry: ChannelEntry): void;
  /**
   * Publications a refill found gone (trimmed from the history before it read them, or
   * dropped from a full hold), in their place among those offered: told with a `gap`
   * unless this subscriber was sent everything up to the last one lost.
   */
  offerLost(channel: string, range: LostRange): void;
  /** The id of the last publication of `channel` sent, or where it started; undefined when not known yet (its `sub` is still reading it). */
  positionOf(channel: string): string | undefined;
}

/** One followed channel on this node. */
interface ChannelState {
  readonly subs: Set<ChannelSubscriber>;
  /** The SUBSCRIBE that the first subscriber sent. */
  readonly ready: Promise<unknown>;
  /** Set while a refill runs: its live publications are held; undefined: offered as they come. */
  hold: Hold | undefined;
}

/**
 * The node's channel subscriptions.
 *
 * When the subscriber connection comes back (Redis restarted, a network blip, Redis
 * cutting it at its Pub/Sub output-buffer limit), the publications made while it was
 * down reached no one here, though the history holds them and their producers got
 * 201 (a reviewer's C2). So once the re-SUBSCRIBE is answered, every followed channel
 * is refilled from its history, after the earliest position of its subscribers and up
 * to its newest id read then (the pages of a `sub`'s catch-up, after the same
 * {@link barrier}), its live publications held meanwhile and merged in id order; each
 * subscriber is sent what is newer than what it had. Only what the history no longer
 * holds is lost, and that is told: each page is read with what the history had
 * trimmed, and publications trimmed before the refill read them (a burst past the
 * history's cap while the connection was down) come to the subscribers as a loss in
 * their place (channel-refill.ts `refillLoss`), a `gap` for each one not sent them
 * already, as the broadcast reader's losses do (docs/protocol.md "Channels").
 */
export class ChannelHub {
  readonly #subscriber: Redis;
  readonly #stream: ChannelStream;
  readonly #keys: Keys;
  readonly #logger: Logger;
  /** channel → its local subscribers. */
  readonly #channels = new Map<string, ChannelState>();
  /** Counts the subscriber's `ready`s: a refill a later one overtook stops and leaves the rest to it. */
  #round = 0;
  /** Pub/Sub topic → channel. */
  readonly #topics = new Map<string, string>();
  /**
   * Topic → channel, for topics nobody here follows whose UNSUBSCRIBE failed (Redis
   * was unreachable). ioredis re-subscribes every topic it still counts when it
   * reconnects, so these are unsubscribed again once the connection is back.
   */
  readonly #stale = new Map<string, string>();

  /**
   * @param subscriber a connection in subscriber mode (shared with the node bus)
   * @param stream the channels' histories, read by a refill
   */
  constructor(subscriber: Redis, stream: ChannelStream, keys: Keys, logger: Logger) {
    this.#subscriber = subscriber;
    this.#stream = stream;
    this.#keys = keys;
    this.#logger = logger;
    subscriber.on('message', (topic: string, text: string) => this.#onMessage(topic, text));
    // ioredis emits `ready` on the tick after it re-sent its SUBSCRIBEs, so these
    // UNSUBSCRIBEs reach Redis after them, and no publication of the new connection
    // comes before the channels are held.
    subscriber.on('ready', () => {
      const round = ++this.#round;
      for (const state of this.#channels.values()) state.hold ??= new Hold();
      this.#resubscribe(round);
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
      state = { subs: new Set(), ready: redisCall(() => this.#subscriber.subscribe(topic)), hold: undefined };
      this.#channels.set(channel, state);
    }
    state.subs.add(sub);
    try {
      await state.ready;
    } catch (err) {
      state.subs.delete(sub);
      if (this.#channels.get(channel) === state) {
        this.#channels.delete(channel);
        state.hold?.end();
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
   * With `channel`, also until a refill of it running then has offered them (it
   * holds them meanwhile), or ended without.
   * @throws PixiuError UNAVAILABLE when the subscriber connection is down or times out
   */
  async barrier(channel?: string): Promise<void> {
    await redisCall(() => this.#subscriber.ping());
    if (channel !== undefined) await this.refilled(channel);
  }

  /**
   * How many times the subscriber connection has come back (each starts a refill): a
   * `sub` that reads where it starts compares it before and after the read.
   */
  get round(): number {
    return this.#round;
  }

  /** True while a refill of `channel` runs (its live publications held). */
  refilling(channel: string): boolean {
    return this.#channels.get(channel)?.hold !== undefined;
  }

  /** Resolves when no refill of `channel` runs (at once when none does); never rejects. */
  async refilled(channel: string): Promise<void> {
    // A hold that ends may hand over to the next one (a later reconnect's).
    for (let hold = this.#channels.get(channel)?.hold; hold !== undefined; hold = this.#channels.get(channel)?.hold) await hold.ended;
  }

  /** Removes a local subscriber; the last one unsubscribes the node. Never rejects. */
  async leave(channel: string, sub: ChannelSubscriber): Promise<void> {
    const state = this.#channels.get(channel);
    if (!state?.subs.delete(sub) || state.subs.size > 0) return;
    this.#channels.delete(channel);
    // Nobody follows it here any more: a refill of it stops, and nothing waits on it.
    state.hold?.end();
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
   * The subscriber (re)connected: subscribes again to every followed channel, then
   * refills them. ioredis re-subscribes on its own, but one that fails (the connection
   * dropped again) is forgotten, and the followers would get nothing more; SUBSCRIBE
   * to a topic already followed is a no-op.
   */
  #resubscribe(round: number): void {
    const topics = [...this.#topics.keys()];
    if (topics.length === 0) return;
    redisCall(() => this.#subscriber.subscribe(...topics)).then(() => this.#refill(round), (err: unknown) => {
      this.#logger.warn(outageFields(err), 'channel re-subscribe failed; retried on the next reconnect');
      this.#releaseAll(round);
    });
  }

  /**
   * Refills every held channel from its history (see the class comment), then lets
   * its live publications through. Never rejects: a channel whose reads fail is read
   * again after {@link REFILL_RETRY_MS} until Redis answers (the subscriber connection
   * may come back before the command connection does: a Redis restart, a chwalk
   * finding), its live publications held meanwhile, while this round lasts and someone
   * here follows it, for {@link REFILL_GIVE_UP_MS} at most (then it gives up, as it did
   * at once before: the held publications go out, a warning says what was lost); one
   * warning per round says reads are tried again, one info line per channel when its
   * read succeeded after tries. A channel whose history key holds
   * another type (src/redis/wrong-type.ts) is not tried again: nothing was published
   * to it meanwhile (every publish fails on that key), so nothing is lost; it is logged
   * at error naming the key, as no retry cures it.
   */
  async #refill(round: number): Promise<void> {
    let pending: RefillPlan<ChannelState>[] = [...this.#channels].filter(([, state]) => state.hold !== undefined)
      .map(([channel, state]) => {
        const from = earliestPosition(state.subs, channel);
        return { channel, state, from, at: from, lost: false };
      });
    const going = (plan: RefillPlan<ChannelState>): boolean => round === this.#round && this.#channels.get(plan.channel) === plan.state && this.#subscriber.status !== 'end';
    const triedSince = performance.now();
    let losses = 0;
    for (let attempt = 1; pending.length > 0; attempt++) {
      // The newest ids first, then one barrier for them all: the live copies of what a
      // page may jump over (trimmed since) are held by then (the `sub`'s race, C1).
      const newest = await Promise.allSettled(pending.map(({ channel, at }) => at === undefined ? undefined : this.#stream.newestId(channel)));
      const barrier = await this.barrier().then(() => undefined, (err: unknown) => err ?? new Error('barrier failed'));
      const failed: Array<{ plan: RefillPlan<ChannelState>; err: unknown }> = [];
      await Promise.all(pending.map(async (plan, i) => {
        try {
          if (barrier !== undefined) throw barrier;
          const upTo = newest[i] as PromiseSettledResult<string | undefined>;
          if (upTo.status === 'rejected') throw upTo.reason;
          if (plan.at !== undefined && upTo.value !== undefined) await this.#readChannel(plan, upTo.value, () => going(plan), () => { losses++; });
          if (attempt > 1) this.#logger.info({ channel: plan.channel, attempts: attempt }, 'channel refill after the subscriber reconnected read the history');
        } catch (err) {
          if (isWrongTypeFailure(err)) {
            this.#logger.error({ channel: plan.channel, err: err.cause, reason: err.message }, 'channel refill after the subscriber reconnected failed on a key of the wrong type');
          } else {
            failed.push({ plan, err });
            return;
          }
        }
        if (going(plan)) this.#release(plan.channel, plan.state, plan.read);
      }));
      // Redis failing for this node's command connection (it may come back after the
      // subscriber does: a Redis restart): the failed channels are read again, all
      // together, until Redis answers, their live publications held meanwhile.
      pending = failed.filter(({ plan }) => going(plan)).map(({ plan }) => plan);
      if (pending.length === 0) break;
      const first = failed[0]?.err;
      if (attempt === 1) {
        this.#logger.warn(outageFields(first), 'channel refill after the subscriber reconnected failed; its reads are tried again until Redis answers, live publications held meanwhile');
      }
      if (performance.now() - triedSince >= REFILL_GIVE_UP_MS) {
        for (const plan of pending) {
          this.#logger.warn({ ...outageFields(first), channel: plan.channel, attempts: attempt },
            `channel refill after the subscriber reconnected failed for ${REFILL_GIVE_UP_MS / 1000} s; publications made while it was down are lost for this channel`);
          this.#release(plan.channel, plan.state, plan.read ?? (plan.at === plan.from ? undefined : plan.at));
        }
        break;
      }
      await sleep(REFILL_RETRY_MS[Math.min(attempt, REFILL_RETRY_MS.length) - 1] as number);
      pending = pending.filter(going);
    }
    if (losses > 0) {
      this.#logger.warn({ channels: losses }, 'channel refill after the subscriber reconnected found publications trimmed from the history before it read them; their subscribers are sent a gap');
    }
  }

  /**
   * Reads one channel's history after `plan.at` up to `upTo`, offering each publication
   * after the held ones older than it, and telling what the history trimmed before the
   * page was read (once the barrier is answered: see below). Moves `plan.at` and
   * `plan.read` as it reads, so a read tried again starts after what this one offered.
   * @param onFirstLoss called the first time this channel tells a loss
   * @throws PixiuError UNAVAILABLE when a read or the barrier fails
   */
  async #readChannel(plan: RefillPlan<ChannelState>, upTo: string, going: () => boolean, onFirstLoss: () => void): Promise<void> {
    const { channel, state } = plan;
    plan.read = await readHistory(this.#stream, channel, plan.at as string, upTo, going, {
      entry: (entry) => {
        plan.at = entry.id;
        this.#offerHeldUpTo(channel, state, entry);
      },
      trimmed: async (after, page) => {
        // Publications made after the subscriber came back but before this page was
        // read may be trimmed already while their live copies are still on the way:
        // once the barrier is answered the hold has them, and they are no loss.
        await this.barrier();
        if (!going()) return;
        const loss = refillLoss(after, page, state.hold?.entries ?? []);
        if (loss === undefined) return;
        if (!plan.lost) onFirstLoss();
        plan.lost = true;
        this.#offerLost(state, channel, loss);
      },
    });
  }

  /** Offers a refilled publication, after the held ones older than it (one with its id only once). */
  #offerHeldUpTo(channel: string, state: ChannelState, entry: ChannelEntry): void {
    const held = state.hold?.entries ?? [];
    let n = 0;
    while (n < held.length && compareStreamIds((held[n] as ChannelEntry).id, entry.id) <= 0) n++;
    for (const h of held.splice(0, n)) if (h.id !== entry.id) this.#offerRecovered(state, channel, h);
    this.#offerRecovered(state, channel, entry);
  }

  /**
   * Ends a channel's hold: what it held is offered (as refilled: a subscriber may have
   * it), then live ones as they come. Those a full hold dropped that the refill did not
   * read (newer than `read`, the last entry it read) are a loss, told first
   * ({@link holdLoss}).
   */
  #release(channel: string, state: ChannelState, read?: string): void {
    const hold = state.hold;
    state.hold = undefined;
    const loss = holdLoss(hold, read);
    if (loss !== undefined) this.#offerLost(state, channel, loss);
    for (const entry of hold?.entries ?? []) this.#offerRecovered(state, channel, entry);
    hold?.end();
  }

  /** A re-subscribe failed: every channel held by `round` lets its live publications through again. */
  #releaseAll(round: number): void {
    if (round !== this.#round) return;
    for (const [channel, state] of this.#channels) this.#release(channel, state);
  }

  #offerLost(state: ChannelState, channel: string, range: LostRange): void {
    for (const sub of state.subs) sub.offerLost(channel, range);
  }

  #offerRecovered(state: ChannelState, channel: string, entry: ChannelEntry): void {
    for (const sub of state.subs) sub.offerRecovered(channel, entry);
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
    // exception, the end of the process), and a payload that is no publication's
    // (`{}`, say) made a broken `pub` frame.
    if (!isStreamId(id) || !isPublicationPayload(text.slice(bar + 1))) {
      this.#logger.warn({ channel }, 'malformed channel publication ignored');
      return;
    }
    const entry: ChannelEntry = { id, frame: pubFrame(channel, id, text.slice(bar + 1)) };
    const state = this.#channels.get(channel);
    if (state?.hold !== undefined) {
      // Held during a refill; past the follower's bound the oldest go, told lost at its end (#release).
      if (state.hold.entries.push(entry) > MAX_CATCH_UP_QUEUE) state.hold.droppedUpTo = state.hold.entries.shift()?.id;
      return;
    }
    for (const sub of state?.subs ?? []) sub.offerPub(channel, entry);
  }
}
