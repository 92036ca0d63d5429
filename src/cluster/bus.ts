/**
 * The node bus (DESIGN.md §9): Redis Pub/Sub, one channel per node. Appends for users
 * held by other nodes are announced to those nodes (`notify`), and so is an epoch
 * rotation made here (`pull`: read the inbox now); admin disconnects and
 * device replacements reach the node holding the connection (`kick`).
 *
 * Notifies are coalesced per node per tick into one PUBLISH. A PUBLISH that reaches
 * no subscriber means the node is gone: its presence entries for those users are
 * cleared (via `onGone`). Pub/Sub is at-most-once; a lost notify costs latency only,
 * because heartbeats pull (DESIGN.md §5).
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { outageFields } from '../errors.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';

/** `text` with Redis glob characters (`* ? [ ] \\`) escaped, for a PUBSUB or SCAN pattern. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * How many nodes are running on this Redis and key prefix, as Pub/Sub sees them: node
 * channels with a subscriber (PUBSUB CHANNELS; on a Redis Cluster, those of the shard
 * asked). Unlike every key, subscriptions outlive a FLUSHALL: this is how a starting
 * node tells "new Redis" from "Redis just lost its data under running nodes".
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function listeningNodes(redis: Redis, keys: Keys): Promise<number> {
  const pattern = `${globEscape(keys.nodeChannel(''))}*`;
  return (await redisCall(() => redis.pubsub('CHANNELS', pattern)) as string[]).length;
}

/** A kick: close connections of a user on the receiving node. */
export interface KickMessage {
  readonly t: 'kick';
  readonly user: string;
  /** Only this connection; else every connection of the user (of `device`, if given). */
  readonly conn?: string;
  readonly device?: string;
  readonly code: number;
  readonly reason: string;
}

/**
 * A notify: appends happened for these users: `[user, latest seq, its MsgID]`. The MsgID
 * lets the receiving node check the seq against what it delivered there (epoch-guard.ts:
 * two messages at one seq prove that Redis lost writes). An older node's `[user, seq]`
 * is still taken (the MsgID then unknown), and an older node ignores the third field.
 * `[user, 0]` names no append (seqs start at 1): read the inbox now ({@link Bus.pull}:
 * its epoch was rotated). A seq not new makes the receiving machine read even for a
 * full window (machine.ts `notify`), so every release that takes `[user, seq]` reads then.
 */
export interface NotifyMessage {
  readonly t: 'notify';
  readonly users: ReadonlyArray<readonly [string, number] | readonly [string, number, string]>;
}

/** What travels on a node channel. */
export type BusMessage = NotifyMessage | KickMessage;

/** What the bus needs. */
export interface BusOptions {
  readonly node: string;
  /** Publishes. */
  readonly redis: Redis;
  /** A connection of its own, in subscriber mode. */
  readonly subscriber: Redis;
  readonly keys: Keys;
  readonly logger: Logger;
  /** An append for `user` landed at `seq`, as MsgID `id` (undefined: an older node's notify, which names none). */
  readonly onNotify: (user: string, seq: number, id: string | undefined) => void;
  readonly onKick: (kick: KickMessage) => void;
  /** A node received nothing: it may be gone; clear its presence for these users if so. */
  readonly onGone: (node: string, users: readonly string[]) => void;
  /** This node's channel was subscribed again after a reconnect (notifies sent meanwhile were lost). */
  readonly onResubscribed?: () => void;
}

/** A close code a WebSocket close frame may carry that the service sends (RFC 6455 §7.4). */
function isCloseCode(code: unknown): boolean {
  return Number.isInteger(code) && (code === 1000 || code === 1001 || code === 1008 || ((code as number) >= 3000 && (code as number) <= 4999));
}

/** An optional string field: absent, or a string. */
const optionalString = (v: unknown): boolean => v === undefined || typeof v === 'string';

/**
 * Whether a bus message has the shape the handlers rely on. Anything else is ignored:
 * a notify entry that is not `[user, seq]` or `[user, seq, id]` threw in the loop over them, and a kick
 * without a reason string or with a code no close frame can carry threw in
 * WsConnection.close — out of the subscriber's handler, crashing the process.
 */
function isBusMessage(v: unknown): v is BusMessage {
  if (typeof v !== 'object' || v === null) return false;
  const m = v as { t?: unknown; users?: unknown; user?: unknown; code?: unknown; reason?: unknown; conn?: unknown; device?: unknown };
  if (m.t === 'notify') {
    return Array.isArray(m.users) && m.users.every((u: unknown) => Array.isArray(u) && typeof u[0] === 'string' && Number.isSafeInteger(u[1]) && (u[1] as number) >= 0 && optionalString(u[2]));
  }
  return m.t === 'kick' && typeof m.user === 'string' && isCloseCode(m.code) && typeof m.reason === 'string' && optionalString(m.conn) && optionalString(m.device);
}

/** What is pending for one user of one node until the end of the tick ({@link Bus}). */
interface PendingNotify {
  /** The latest seq appended (0: no append). */
  seq: number;
  /** Its MsgID; absent with no append. */
  id?: string;
  /** A read was asked for ({@link Bus.pull}). */
  pull?: true;
}

/** The node bus. */
export class Bus {
  readonly #opts: BusOptions;
  readonly #channel: string;
  /**
   * node → user → latest seq and its MsgID (seq 0: no append), and whether a read was
   * asked for ({@link pull}), published at the end of the tick.
   */
  #pending = new Map<string, Map<string, PendingNotify>>();
  #scheduled = false;

  constructor(opts: BusOptions) {
    this.#opts = opts;
    this.#channel = opts.keys.nodeChannel(opts.node);
  }

  /** Subscribes to this node's channel. @throws PixiuError UNAVAILABLE */
  async start(): Promise<void> {
    this.#opts.subscriber.on('message', (channel: string, text: string) => {
      if (channel !== this.#channel) return;
      let msg: unknown;
      try {
        msg = JSON.parse(text);
      } catch {
        msg = undefined;
      }
      if (!isBusMessage(msg)) {
        this.#opts.logger.warn({ channel }, 'malformed bus message ignored');
        return;
      }
      if (msg.t === 'kick') this.#opts.onKick(msg);
      else for (const [user, seq, id] of msg.users) this.#opts.onNotify(user, seq, id);
    });
    // After every reconnect: ioredis re-subscribes on its own, but a re-subscribe that
    // fails (the connection dropped again) is forgotten, and the node would hear no
    // notify or kick until it restarted. SUBSCRIBE to a channel already followed is a
    // no-op.
    this.#opts.subscriber.on('ready', () => {
      redisCall(() => this.#opts.subscriber.subscribe(this.#channel))
        .then(() => this.#opts.onResubscribed?.(),
          (err: unknown) => this.#opts.logger.warn(outageFields(err), 'bus re-subscribe failed; retried on the next reconnect'));
    });
    await redisCall(() => this.#opts.subscriber.subscribe(this.#channel));
  }

  /** Announces the append of MsgID `id` at `seq` of `user`'s inbox to `node` (coalesced per tick: the highest seq, with its MsgID). */
  notify(node: string, user: string, seq: number, id: string): void {
    const users = this.#users(node);
    const pending = users.get(user);
    if (pending === undefined) users.set(user, { seq, id });
    else if (pending.seq < seq) {
      pending.seq = seq;
      pending.id = id;
    }
  }

  /**
   * Asks `node` to read `user`'s inbox now, though nothing was appended: its epoch was
   * rotated here, and the user's connections there are to be reset at once
   * (docs/protocol.md "Where delivery starts"). Sent as `[user, 0]` ({@link NotifyMessage}),
   * besides an append's notify in the same tick (which alone may read nothing for a full
   * window). At most once: a lost one leaves the read to the connections' next heartbeat.
   */
  pull(node: string, user: string): void {
    const users = this.#users(node);
    const pending = users.get(user);
    if (pending === undefined) users.set(user, { seq: 0, pull: true });
    else pending.pull = true;
  }

  /** The notifies pending for `node`; schedules their PUBLISH at the end of the tick. */
  #users(node: string): Map<string, PendingNotify> {
    let users = this.#pending.get(node);
    if (users === undefined) {
      users = new Map();
      this.#pending.set(node, users);
    }
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
    return users;
  }

  /** Sends a kick to `node`. Resolves false when no node received it. */
  async kick(node: string, kick: KickMessage): Promise<boolean> {
    const receivers = await redisCall(() => this.#opts.redis.publish(this.#opts.keys.nodeChannel(node), JSON.stringify(kick)));
    return receivers > 0;
  }

  /** Unsubscribes. Never rejects. */
  async stop(): Promise<void> {
    await redisCall(() => this.#opts.subscriber.unsubscribe(this.#channel)).catch(() => undefined);
  }

  #flush(): void {
    this.#scheduled = false;
    const pending = this.#pending;
    this.#pending = new Map();
    for (const [node, users] of pending) {
      const entries: Array<NotifyMessage['users'][number]> = [];
      for (const [user, { seq, id, pull }] of users) {
        if (id !== undefined) entries.push([user, seq, id]);
        if (pull === true) entries.push([user, 0]);
      }
      const message: NotifyMessage = { t: 'notify', users: entries };
      redisCall(() => this.#opts.redis.publish(this.#opts.keys.nodeChannel(node), JSON.stringify(message))).then(
        (receivers) => {
          if (receivers === 0) this.#opts.onGone(node, [...users.keys()]);
        },
        (err: unknown) => this.#opts.logger.debug({ err, node }, 'notify publish failed; heartbeats will pull'),
      );
    }
  }
}
