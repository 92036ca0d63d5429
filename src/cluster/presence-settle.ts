/**
 * Presence adds whose reply did not reach this node, settled once Redis answers
 * (DESIGN.md §4 `conns`, `replaced`; docs/decisions.md, "A presence add whose reply is
 * lost"). When `presence-add-2.lua` rejects, Redis may still have run it (its reply
 * came past the command timeout, or the link was lost): its entry would be an orphan,
 * and the connections it replaced would stay open, told by no one, until their own
 * refresh found their place taken (up to PIXIU_HEARTBEAT), beside the device's next
 * connection. So the add is settled (`presence-settle-2.lua`): at once, then every
 * second while Redis fails (presence-removals.ts), when the node's Redis connection is
 * back, and before the user's next add on this node, until the entry would have
 * expired. The settling deletes the entry and answers the connections the add
 * replaced, as `presence-add-2.lua` recorded them, for the caller to close 4002 —
 * except one whose handshake came after the failed one's (the device's retry, which an
 * add that reached Redis late replaced): that one is written back, unless the device
 * has a live entry again (review-presence F2).
 */
import type { Redis } from 'ioredis';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { evalScript } from '../redis/scripts.js';
import type { ReplacedEntry } from './presence.js';
import { PendingRemovals } from './presence-removals.js';
import { PRESENCE_SCRIPTS } from './scripts.js';

/** Options of {@link UnansweredAdds}. */
export interface UnansweredAddsOptions {
  /** Lifetime of an entry without a refresh, ms: how long an add is settled for. */
  readonly ttlMs: number;
  /** How often settlings that failed are tried again while Redis fails, ms. */
  readonly retryMs: number;
  /** The time entries expire by, ms since the Unix epoch (Presence's: Redis's clock). */
  readonly now: () => number;
  /**
   * Called with the connections an add replaced whose reply did not reach this node,
   * once Redis answered the settling of it: they are to be closed 4002, as on the
   * add's reply. Once each (within an entry lifetime): several settlings of one add in
   * flight when Redis answers again (the retries', the one before the user's next add)
   * each answer them alike; they were handed over, and logged, 2–3 times (walk33
   * L-dup-log). A settling whose own reply was lost hands nothing, and one after it does.
   */
  readonly onReplaced?: (user: string, replaced: readonly ReplacedEntry[]) => void;
}

/**
 * The `conn, entry, conn, entry, …` pairs of a presence script's reply from index
 * `from`, as {@link ReplacedEntry}s (each entry read as `<expiresAt>|<node>|<device>|…`).
 */
export function replacedEntries(reply: readonly (number | string)[], from: number): ReplacedEntry[] {
  const replaced: ReplacedEntry[] = [];
  for (let i = from; i + 1 < reply.length; i += 2) {
    const value = String(reply[i + 1]);
    replaced.push({ conn: String(reply[i]), node: value.split('|')[1] ?? '', value });
  }
  return replaced;
}

/** The adds of this node whose reply was lost, settled until they would have expired. */
export class UnansweredAdds {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #opts: UnansweredAddsOptions;
  /** The pending adds, each with its handshake's `since` (ms since the epoch, this node's clock, as in its entry). */
  readonly #pending: PendingRemovals<number>;
  /**
   * The replaced connections handed to `onReplaced` already, `<user> <conn>` → until
   * when it is remembered (ms since the epoch, this node's clock: one entry lifetime on).
   */
  readonly #handed = new Map<string, number>();
  /** Forgets {@link #handed}'s past keys while it holds any, one entry lifetime apart. */
  #forgetTimer: NodeJS.Timeout | undefined;

  /** The caller loads `PRESENCE_SCRIPTS` on `redis` (src/cluster/presence.ts does). */
  constructor(redis: Redis, keys: Keys, opts: UnansweredAddsOptions) {
    this.#redis = redis;
    this.#keys = keys;
    this.#opts = opts;
    this.#pending = new PendingRemovals<number>((user, conns, sinces) => this.#settle(user, conns, sinces), opts.retryMs);
  }

  /** How many adds wait to be settled (metrics). */
  get size(): number {
    return this.#pending.size;
  }

  /** How many handed-over connections are remembered now (tests). */
  get handedRemembered(): number {
    return this.#handed.size;
  }

  /**
   * Keeps the add of `conn` (which rejected) to settle, and sends its settling now, on
   * the same Redis connection: Redis runs it after the add, if it runs the add.
   * @param since the handshake's time, ms since the epoch, as the add wrote it in the entry
   */
  failed(user: string, conn: string, since: number): void {
    // Its entry expires one entry lifetime after the add was made (entryValue in
    // Presence's #add); the retries stop one entry lifetime from now, a duration on this
    // node's clock (the two clocks need not agree), when the entry is gone anyway.
    this.#pending.add(user, conn, Date.now() + this.#opts.ttlMs, since);
    void this.#pending.retryUser(user);
  }

  /** Settles `user`'s pending adds now (sent before this returns: before the user's next add). Never rejects. */
  retryUser(user: string): Promise<void> {
    return this.#pending.retryUser(user);
  }

  /** Tries every pending settling once (Redis is back). Never rejects. */
  retryAll(): Promise<void> {
    return this.#pending.retryAll();
  }

  /** Stops retrying and forgets what is pending (shutdown). */
  stop(): void {
    this.#pending.stop();
    this.#handed.clear();
    clearTimeout(this.#forgetTimer);
    this.#forgetTimer = undefined;
  }

  /**
   * Settles the adds of `conns` whose reply was lost (`presence-settle-2.lua`): deletes
   * their entries, writes back a connection of the device newer than the add, and
   * hands the others it replaced to {@link UnansweredAddsOptions.onReplaced}.
   * @param sinces each add's handshake time, as {@link failed} was given it
   * @throws PixiuError UNAVAILABLE when Redis fails (they stay to settle)
   */
  async #settle(user: string, conns: readonly string[], sinces: readonly (number | undefined)[]): Promise<void> {
    const keys = this.#keys.user(user);
    // An add without a time (none is) is taken for older than every connection: what it replaced is closed.
    const adds = conns.flatMap((conn, i) => [conn, String(sinces[i] ?? 0)]);
    const reply = await redisCall(() => evalScript<string[]>(this.#redis, PRESENCE_SCRIPTS.settle, [keys.conns, keys.replaced], [
      String(this.#opts.now()), String(this.#opts.ttlMs), ...adds]));
    const replaced = this.#notHanded(user, replacedEntries(reply, 0));
    if (replaced.length > 0) this.#opts.onReplaced?.(user, replaced);
  }

  /** Those of `replaced` not handed over yet, remembered as handed from now on; forgets what is past its time. */
  #notHanded(user: string, replaced: readonly ReplacedEntry[]): ReplacedEntry[] {
    const now = Date.now();
    this.#forgetPast(now);
    const fresh = replaced.filter(({ conn }) => {
      const key = `${user} ${conn}`;
      if (this.#handed.has(key)) return false;
      this.#handed.set(key, now + this.#opts.ttlMs);
      return true;
    });
    this.#forgetLater();
    return fresh;
  }

  /**
   * Forgets the hand-overs past their time. Also run on a timer while any is remembered:
   * else, after an outage that settled many adds, their keys stayed until the node's next
   * settling, which may never come (reread-presence F9).
   */
  #forgetPast(now: number): void {
    for (const [key, until] of this.#handed) if (until <= now) this.#handed.delete(key);
  }

  #forgetLater(): void {
    if (this.#handed.size === 0) return;
    this.#forgetTimer ??= setTimeout(() => {
      this.#forgetTimer = undefined;
      this.#forgetPast(Date.now());
      this.#forgetLater();
    }, this.#opts.ttlMs).unref();
  }
}
