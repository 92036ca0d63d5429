/**
 * One connection's channel subscriptions (DESIGN.md §6, §8): `sub {channel, since?}`
 * and `unsub {channel}` frames. A channel may be followed when a pattern in the JWT's
 * `channels` claim allows it (src/channels/patterns.ts); otherwise the answer is an
 * `error` frame. `since` catches up from the channel's short history first. A `sub`
 * that follows is answered `subscribed {channel, since}` before any publication of the
 * channel: the id after which the connection receives it, a `since` to resume with
 * (docs/protocol.md "Channels"; the channels' `welcome.bseq`). A `refresh` whose
 * patterns no longer allow a channel followed drops it.
 */
import { isPixiuError, PixiuError } from '../errors.js';
import type { LogThrottle } from '../log-throttle.js';
import { StreamFollower, type LostRange } from '../streams/follower.js';
import { compareStreamIds, isStreamId, normalizeStreamId } from '../streams/stream-id.js';
import type { ChannelHub, ChannelSubscriber } from './channel-hub.js';
import { HISTORY_PAGE, SINCE_MALFORMED, subscribedFrame, type ChannelEntry, type ChannelStream } from './channel-stream.js';
import { channelAllowed, isChannelName, MAX_CHANNEL_LENGTH, MAX_CHANNELS_PER_CONNECTION } from './patterns.js';

/** What a connection's channels need. */
export interface ChannelDeps {
  readonly hub: ChannelHub;
  readonly stream: ChannelStream;
  /**
   * The node's thinning of the error lines of `sub`s failed by a channel key of the
   * wrong type (src/gateway/channel-frames.ts `SUB_FAILED_LOG`): one throttle for all
   * its connections, as every client following the channel fails on it at once.
   */
  readonly subFailureLog: LogThrottle;
  /** A channel `gap` frame was written to a connection (metrics: `pixiu_channel_gaps_total`); absent: not counted. */
  readonly onGap?: () => void;
}

/**
 * Said of a token with no `channels` claim at all, when it does not allow a channel:
 * leaving the claim out (an identity provider's mapper that drops it) is the first
 * thing an integrator gets wrong, and the bare refusal read like a pattern that did
 * not match (a newcomer's report, L4).
 */
function missingClaimHint(patterns: readonly string[] | undefined): string {
  return patterns === undefined ? ' (the token has no channels claim: mint it with channels patterns, docs/protocol.md "Channels")' : '';
}

/** The refusal of a `sub` of a channel the token's patterns do not allow. */
function notAllowed(channel: string, patterns: readonly string[] | undefined): PixiuError {
  return new PixiuError('FORBIDDEN', `the token does not allow channel ${channel}${missingClaimHint(patterns)}`);
}

function notAChannel(channel: string): PixiuError {
  return new PixiuError('INVALID_REQUEST', `not a channel name: ${JSON.stringify(channel.slice(0, 40))} (1-${MAX_CHANNEL_LENGTH} of A-Z a-z 0-9 _ : - in segments separated by .)`);
}

/** Where a connection's channels write: the connection. */
export interface PubSink {
  /** Writes one frame of type `t`; answers whether it did (false: the connection is closing, or refused a `pub`). */
  send(text: string, t: 'pub' | 'subscribed' | 'gap'): boolean;
  /** Undefined while the connection takes more; else resolves when it does (see WsConnection.whenWritable). */
  whenWritable(): Promise<void> | undefined;
}

/** The channels of one connection. */
export class ConnectionChannels implements ChannelSubscriber {
  readonly #deps: ChannelDeps;
  readonly #sink: PubSink;
  readonly #followers = new Map<string, StreamFollower<ChannelEntry>>();
  /** The token's `channels` patterns, as they are now (a `refresh` may change them: {@link dropDisallowed}); undefined: no claim. */
  readonly #patterns: () => readonly string[] | undefined;

  /**
   * @param patterns the JWT's `channels` claim as it is now (read at each `sub`: a `refresh`
   *   may change it); undefined when the token has none
   * @param sink the connection: its frames, and its backpressure for catch-ups
   */
  constructor(deps: ChannelDeps, patterns: () => readonly string[] | undefined, sink: PubSink) {
    this.#deps = deps;
    this.#patterns = patterns;
    this.#sink = sink;
  }

  /** Channels followed. */
  get channels(): readonly string[] {
    return [...this.#followers.keys()];
  }

  /**
   * Follows a channel, answering `subscribed {channel, since}` before any publication
   * of it goes out ({@link #subscribed}). A second `sub` of a channel followed changes
   * nothing (its `since` is not read) and is answered `subscribed` with the id of the
   * last publication sent on it, or where it started: still a position to resume from.
   * @throws PixiuError INVALID_REQUEST for a bad name or `since`; FORBIDDEN when no
   *   pattern of the token allows it ({@link notAllowed}); RATE_LIMITED over the per-connection limit;
   *   UNAVAILABLE when Redis fails; INTERNAL naming the channel when its history key
   *   holds another type than a stream (src/redis/wrong-type.ts: no retry cures it).
   *   After any of these the channel is not followed (part of its history may have
   *   been sent before a later page's read failed).
   */
  async sub(channel: string, since: string | undefined): Promise<void> {
    // A malformed frame is INVALID_REQUEST whatever the token allows: it counts towards
    // the bad-frame limit, where a well-formed refused one (FORBIDDEN) does not.
    if (!isChannelName(channel)) throw notAChannel(channel);
    if (since !== undefined && !isStreamId(since)) {
      throw new PixiuError('INVALID_REQUEST', SINCE_MALFORMED);
    }
    // A channel followed already changes nothing: the patterns allow it (a `refresh`
    // that stopped allowing it dropped it: dropDisallowed). Its position is set before
    // its own `subscribed` went out (startAfter, catchUp), so it is never undefined here.
    const followed = this.#followers.get(channel);
    if (followed !== undefined) {
      this.#subscribed(channel, followed.position ?? '0-0');
      return;
    }
    const patterns = this.#patterns();
    if (!channelAllowed(channel, patterns ?? [])) throw notAllowed(channel, patterns);
    if (this.#followers.size >= MAX_CHANNELS_PER_CONNECTION) {
      throw new PixiuError('RATE_LIMITED', `at most ${MAX_CHANNELS_PER_CONNECTION} channels per connection`);
    }
    const follower = new StreamFollower<ChannelEntry>({ sendEntry: (e) => this.#sink.send(e.frame, 'pub'), sendGap: (from, to) => this.#sendGap(channel, from, to) });
    follower.hold();
    this.#followers.set(channel, follower);
    try {
      await this.#deps.hub.join(channel, this);
    } catch (err) {
      if (this.#followers.get(channel) === follower) this.#followers.delete(channel);
      throw err;
    }
    // An `unsub` (or the close) that came during the join already left the hub.
    if (this.#followers.get(channel) !== follower) return;
    try {
      // Where the connection starts: the channel's newest publication, read after the
      // join took effect in Redis (the SUBSCRIBE answered; the publish script XADDs and
      // PUBLISHes in one step). A publication before this read is in the history, at or
      // before `newest`; one after it is newer and reaches the node live. Those that came
      // live between the join and this read, already queued, are at or before `newest`
      // and are not sent (startAfter): every publication after `newest`, and none at or
      // before it, is sent, so `newest` is the `since` the `subscribed` frame gives.
      let newest: string | undefined;
      try {
        newest = await this.#newestFollowed(channel);
        // With a history to catch up, publications made between the join and that
        // read are the catch-up's (at or before `newest`), but their live copies come
        // on the subscriber connection, which may lag behind the command connection:
        // one the history trimmed before a page read it was jumped over by the page,
        // and its copy, arriving after, dropped as already sent (a reviewer's C1).
        // After the barrier every such copy is queued here (the follower is held), and
        // the catch-up merges it in its place.
        if (since !== undefined && newest !== undefined && compareStreamIds(since, newest) < 0) {
          // Where it starts from here on, as the catch-up will: a refill of the hub's
          // (its subscriber connection back meanwhile) reads from there.
          follower.startAfter(since);
          await this.#deps.hub.barrier(channel);
        }
      } catch (err) {
        // Live publications queued meanwhile are not sent: this sub follows nothing,
        // and a client retrying with `since` the last id it got must not skip history.
        follower.stop();
        follower.release();
        throw err;
      }
      // An `unsub` (or the close) that came during the read stopped the follower and
      // left the hub: nothing to answer.
      if (this.#followers.get(channel) !== follower) return;
      // A `since` ahead of the channel's newest publication (a bogus or foreign id, or
      // a history lost since) would hold back every live publication up to it: it is
      // taken as "now", as no `since` is.
      if (since === undefined || newest === undefined || compareStreamIds(since, newest) > 0) {
        const from = newest ?? '0-0';
        follower.startAfter(from);
        this.#subscribed(channel, from);
        follower.release();
        return;
      }
      // From after `since`: the history up to `newest`, then live (an `error` still
      // follows when a history read fails part-way; the channel is then not followed).
      this.#subscribed(channel, since);
      // Every publication after `newest` (read after the join) comes live, in order:
      // the history is read only up to it. A page's newer entries are left to the live
      // feed: sent from the page, they made the live copies of publications the page
      // jumped over (trimmed), still on their way on the subscriber connection, look
      // already sent, and those were dropped. Those at or before `newest` made after
      // the join are queued already (the barrier above).
      const upTo = newest;
      await follower.catchUp(since, async (after) => {
        try {
          const page = await this.#deps.stream.range(channel, after, HISTORY_PAGE);
          // Entries that are no publication (another writer's) are read past, not stopped at.
          // What the history trimmed past the cursor is told as a `gap` (the follower knows
          // what the live feed brings of it: #sendGap).
          return { entries: page.entries.filter((e) => compareStreamIds(e.id, upTo) <= 0), readUpTo: page.readUpTo, lastTrimmed: page.lastTrimmed };
        } catch (err) {
          // The sub is answered with an error and follows nothing: the live publications
          // queued behind the catch-up are dropped, not flushed before the error (they
          // were: a client retrying with `since` the last id received, as
          // docs/protocol.md says, then skipped the history between).
          follower.stop();
          throw err;
        }
      }, () => this.#sink.whenWritable(), upTo);
    } catch (err) {
      // A sub answered with an error follows nothing (a `since` Redis refused, a
      // history read that failed), so the client's retry — with `since` the last id it
      // got, as docs/protocol.md says — is a sub of its own and catches up again.
      if (this.#followers.get(channel) === follower) {
        this.#followers.delete(channel);
        await this.#deps.hub.leave(channel, this);
      }
      throw err;
    }
  }

  /**
   * The channel's newest id, read while the node's subscriber connection delivers its
   * publications here: a read that a reconnect of that connection overlapped (or one
   * during the refill after it) is made again once that refill is done. Before its
   * position is set, this `sub`'s follower is nothing the refill reads for, so what
   * was published after such a read and before the reconnect reached it neither live
   * nor from the history (a `sub` without `since` started after it).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async #newestFollowed(channel: string): Promise<string | undefined> {
    const hub = this.#deps.hub;
    for (;;) {
      const round = hub.round;
      if (hub.refilling(channel)) {
        await hub.refilled(channel);
        continue;
      }
      const newest = await this.#deps.stream.newestId(channel);
      if (hub.round === round) return newest;
    }
  }

  /**
   * Answers a `sub` that follows `channel`: every publication after `since` (a stream
   * ID; `0-0`: all from now on) is sent after this frame, none at or before it, and
   * no publication of the channel was sent before it. Sent while the channel's
   * follower is held, so no live publication overtakes it.
   */
  #subscribed(channel: string, since: string): void {
    this.#sink.send(subscribedFrame(channel, normalizeStreamId(since)), 'subscribed');
  }

  /**
   * Stops following a channel (one not followed: nothing happens).
   * @throws PixiuError INVALID_REQUEST for a bad name
   */
  async unsub(channel: string): Promise<void> {
    if (!isChannelName(channel)) throw notAChannel(channel);
    if (this.#followers.has(channel)) await this.#forget([channel]);
  }

  /** Leaves every channel (the connection closed). */
  async closeAll(): Promise<void> {
    await this.#forget(this.channels);
  }

  /**
   * After a `refresh`: stops following each channel the token's patterns, as they are
   * now, no longer allow, so that a backend narrowing a user's token revokes live
   * channels too (there is no other server-side unsubscribe; docs/protocol.md
   * "Channels"). No publication of those is sent from the call on; the others stay
   * followed, untouched.
   * @param dropped told of each channel dropped, at once, in the order they were
   *   followed, with the FORBIDDEN error saying why (the connection sends it)
   * @returns when the node has left them (never rejects)
   */
  async dropDisallowed(dropped: (err: PixiuError, channel: string) => void): Promise<void> {
    const patterns = this.#patterns();
    const gone = this.channels.filter((c) => !channelAllowed(c, patterns ?? []));
    const left = this.#forget(gone);
    for (const channel of gone) {
      dropped(new PixiuError('FORBIDDEN', `the refreshed token no longer allows channel ${channel}${missingClaimHint(patterns)}: unsubscribed`), channel);
    }
    await left;
  }

  /**
   * Stops following `channels` (each followed): at once, none of their publications is
   * sent and a catch-up of their history still running reads no further; then the node
   * leaves them.
   */
  async #forget(channels: readonly string[]): Promise<void> {
    for (const channel of channels) {
      this.#followers.get(channel)?.stop();
      this.#followers.delete(channel);
    }
    await Promise.all(channels.map((c) => this.#deps.hub.leave(c, this)));
  }

  /** A live publication from the node's hub. */
  offerPub(channel: string, entry: ChannelEntry): void {
    this.#followers.get(channel)?.offer(entry);
  }

  /** Publications the hub's refill found trimmed before it read them: a `gap` unless all were sent already. */
  offerLost(channel: string, range: LostRange): void {
    this.#followers.get(channel)?.offerLost(range);
  }

  /**
   * Writes the `gap` of `channel`'s publications after `from` and before `to` (both
   * exclusive, docs/protocol.md "Channels"): trimmed from its history before this
   * connection got them (its `since` older than the history, the history trimmed
   * during the catch-up, or the node's refill after its Pub/Sub connection came back
   * finding them gone), or not sendable (the catch-up's queue of live publications
   * overflowed); its follower tells it, in its place among the `pub`s. Counted
   * (`onGap`) only when written: not to a connection closing, as a broadcast gap.
   */
  #sendGap(channel: string, from: string, to: string): void {
    if (this.#sink.send(JSON.stringify({ t: 'gap', stream: 'channel', channel, from, to }), 'gap')) this.#deps.onGap?.();
  }

  /** A publication the hub refills after its reconnect: sent unless one as new was sent already. */
  offerRecovered(channel: string, entry: ChannelEntry): void {
    this.#followers.get(channel)?.offerRecovered(entry);
  }

  /** The id of the last publication of `channel` sent, or where it started; undefined before its `sub` read where to start. */
  positionOf(channel: string): string | undefined {
    return this.#followers.get(channel)?.position;
  }
}
