/**
 * Presence (DESIGN.md §4 `conns`, §9): which connections a user has, on which node,
 * from which device. One hash per user; each entry carries its own expiry and is
 * refreshed on every server heartbeat of its connection, so the connections of a
 * crashed node vanish on their own while the user's other devices stay online.
 * Readers ignore (and prune) entries past their expiry or of nodes no longer
 * registered, and entries of this node naming a connection it does not hold (stale:
 * Redis came back with older data, presence-held.ts). Connections a DELETE closed are
 * marked in a second hash (`closed`), and never written back ({@link Presence.closeConns}).
 * What each add replaced is recorded in a third (`replaced`), for an add whose reply
 * was lost to be settled once Redis answers ({@link Presence.add}).
 *
 * Entry value: `<expiresAtMs>|<node>|<device>|<sinceMs>` (the append script reads the
 * first two fields to name the nodes to notify).
 */
import type { Redis } from 'ioredis';
import { mayHaveRun, redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { evalScript, loadScripts } from '../redis/scripts.js';
import { isOutOfMemory } from '../redis/state-replies.js';
import { keysCall, presenceKeys } from '../redis/wrong-type.js';
import { PRESENCE_SCRIPTS } from './scripts.js';
import { HeldConns } from './presence-held.js';
import { PendingRemovals } from './presence-removals.js';
import { replacedEntries, UnansweredAdds } from './presence-settle.js';

/** How often removals that failed are tried again while Redis fails, ms. */
const REMOVAL_RETRY_MS = 1000;

/**
 * How long a connection `DELETE /v1/users/{uid}/connections` closed stays marked so,
 * ms (one hour): its node, should it not have read the kick, closes it rather than
 * writing its entry back when it next refreshes it ({@link Presence.closeConns}). That
 * refresh comes within a heartbeat on a node that reaches Redis, and within about a
 * second of its link coming back on a node cut off from Redis, which keeps its
 * connections open through any outage: so the mark must outlast the outage, whose
 * length nothing bounds. An hour covers the partitions seen (the network-fault
 * tester's were 30 s to 2 min, a registration lapses after 15 s) many times over, at
 * ~100 bytes of Redis per connection closed for that hour; a node cut off for longer
 * still writes such a connection back (docs/decisions.md, "A closed connection is
 * marked").
 */
export const CLOSED_MARK_MS = 60 * 60 * 1000;

/** One live connection of a user. */
export interface PresenceEntry {
  readonly conn: string;
  readonly node: string;
  readonly device: string;
  /** When it connected, ms since the epoch. */
  readonly since: number;
  /** When the entry lapses unless refreshed, ms since the epoch. */
  readonly expiresAt: number;
}

/** Outcome of {@link Presence.add}. */
export interface AddResult {
  /** False: the user is at the connection limit; nothing was written. */
  readonly admitted: boolean;
  /** Older connections of the same device, now replaced (to close with 4002). */
  readonly replaced: readonly ReplacedEntry[];
}

/** A connection {@link Presence.add} replaced. */
export interface ReplacedEntry {
  readonly conn: string;
  /** The node holding it. */
  readonly node: string;
  /** Its entry value as it was: what {@link Presence.withdraw} writes back. */
  readonly value: string;
}

/**
 * What {@link Presence.refresh} did with a connection's entry: kept, written back
 * (`readded`), or nothing, because a newer connection of its device holds its place
 * (`replaced`), the user is at the limit without it (`over-limit`) or
 * `DELETE /v1/users/{uid}/connections` closed it ({@link ClosedByDelete}).
 */
export type RefreshOutcome = 'kept' | 'readded' | 'replaced' | 'over-limit' | ClosedByDelete;

/** A connection `DELETE /v1/users/{uid}/connections` closed: what to close it with. */
export interface ClosedByDelete {
  /** The WebSocket close code the DELETE gave (1008). */
  readonly code: number;
  readonly reason: string;
}

/** Options of {@link Presence}. */
export interface PresenceOptions {
  /** This node's id. */
  readonly node: string;
  /** Lifetime of an entry without a refresh, ms. */
  readonly ttlMs: number;
  /** Most live connections per user, across nodes (DESIGN.md §6). */
  readonly maxPerUser: number;
  /** Which of these nodes are still registered; entries of the others are dropped. */
  readonly liveNodes: (nodes: readonly string[]) => Promise<ReadonlySet<string>>;
  /**
   * The time entries expire by, ms since the Unix epoch: one clock for every node
   * (the registry's, Redis's: NodeRegistry.now). Default Date.now. With each node's
   * own, a node whose clock ran ahead by more than an entry's time left deleted the
   * entries of live nodes as expired.
   */
  readonly now?: () => number;
  /**
   * Called with the connections an add replaced whose reply did not reach this node
   * (its handshake was answered 503), once Redis answered the settling of it
   * ({@link Presence.add}): they are to be closed 4002, as on the add's reply. Once
   * each, however many settlings answer them (presence-settle.ts). Default: nothing.
   */
  readonly onUnansweredReplaced?: (user: string, replaced: readonly ReplacedEntry[]) => void;
}

function entryValue(expiresAt: number, node: string, device: string, since: number): string {
  return `${expiresAt}|${node}|${device}|${since}`;
}

function parseEntry(conn: string, value: string): PresenceEntry | undefined {
  const m = /^(\d+)\|([^|]+)\|([^|]+)\|(\d+)$/.exec(value);
  if (!m) return undefined;
  return { conn, node: m[2] as string, device: m[3] as string, since: Number(m[4]), expiresAt: Number(m[1]) };
}

/** An entry as read, with its raw value (what a compare-and-delete compares). */
interface ReadEntry {
  readonly entry: PresenceEntry;
  readonly value: string;
}

/** Presence over Redis. Every method rejects with PixiuError UNAVAILABLE when Redis fails. */
export class Presence {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #opts: PresenceOptions;
  readonly #removals: PendingRemovals;
  /** Adds whose reply did not come, to settle once Redis answers: their entries go as removals do, and what they replaced is kicked (presence-settle.ts). */
  readonly #unsettled: UnansweredAdds;
  /** The connections of this node: entries naming this node and none of these are stale. */
  readonly #held = new HeldConns();

  constructor(redis: Redis, keys: Keys, opts: PresenceOptions) {
    this.#redis = redis;
    this.#keys = keys;
    this.#opts = opts;
    this.#removals = new PendingRemovals((user, conns) => this.removeConns(user, conns), REMOVAL_RETRY_MS);
    this.#unsettled = new UnansweredAdds(redis, keys, {
      ttlMs: opts.ttlMs, retryMs: REMOVAL_RETRY_MS, now: () => this.#now(), onReplaced: opts.onUnansweredReplaced,
    });
    loadScripts(redis, Object.values(PRESENCE_SCRIPTS));
  }

  #now(): number {
    return this.#opts.now?.() ?? Date.now();
  }

  /**
   * Removals of entries waiting for a retry (presence-removals.ts): of closed
   * connections, whose removal failed, and of handshakes whose add's reply was lost,
   * not settled yet ({@link add}).
   */
  get pendingRemovals(): number {
    return this.#removals.size + this.#unsettled.size;
  }

  /** Tries the pending removals and settlings now (Redis is back). Never rejects. */
  async retryRemovals(): Promise<void> {
    await Promise.all([this.#removals.retryAll(), this.#unsettled.retryAll()]);
  }

  /** Stops retrying removals and settlings (shutdown). */
  stop(): void {
    this.#removals.stop();
    this.#unsettled.stop();
  }

  /**
   * Records a new connection on this node, unless the user is at the limit; replaces
   * the same device's older connections (DESIGN.md §6: the same device connecting
   * again replaces its old connection). Only live entries count: expired ones, those
   * of nodes no longer registered and this node's stale ones do not. From here until
   * {@link remove}, `conn` is one this node holds.
   *
   * When it rejects, Redis may still have run the add (its reply came past the command
   * timeout, or the link was lost): the entry would be an orphan, and the connections it
   * replaced would stay open, told by no one, until their own refresh found their place
   * taken (up to PIXIU_HEARTBEAT), beside the device's next connection. So the add is
   * settled (presence-settle.ts), at once and then every second while Redis fails,
   * until the entry would have expired: its entry deleted, and the connections it
   * replaced, as `presence-add-2.lua` recorded them, handed to
   * {@link PresenceOptions.onUnansweredReplaced} — but for one whose handshake came after
   * this one (`since`: the device's retry, which the add replaced by reaching Redis
   * late), written back instead. An add that never ran leaves nothing to settle, and
   * one that provably did not is not settled (src/redis/client.ts `mayHaveRun`).
   * (docs/decisions.md, "A presence add whose reply is lost".)
   * @throws PixiuError UNAVAILABLE when Redis fails (the add is then settled later);
   *   INTERNAL naming the user's presence when a key of it holds another type (nothing written)
   */
  async add(user: string, conn: string, device: string, since: number): Promise<AddResult> {
    // Held before its entry is written: a refresh or a read that sees the entry must
    // not take it for a stale one.
    this.#held.hold(user, conn);
    try {
      const added = await this.#admit(user, conn, device, since);
      if (!added.admitted) this.#held.release(user, conn);
      return added;
    } catch (err) {
      this.#held.release(user, conn);
      // Only an add Redis may have run leaves anything to settle: not one refused
      // unsent (Redis down), answered with an error, or failed before any Redis call
      // (a bad uid), which would each count as pending and be retried for a lifetime.
      if (mayHaveRun(err)) this.#unsettled.failed(user, conn, since);
      throw err;
    }
  }

  /** {@link add} once `conn` is held. */
  async #admit(user: string, conn: string, device: string, since: number): Promise<AddResult> {
    // The user's connections that closed while Redis failed give their slots back first.
    // Not awaited: its HDEL is sent now, on this connection, so Redis runs it before the
    // add script below (one connection answers in order), and a Redis that does not
    // answer costs one command timeout, not two.
    void this.#removals.retryUser(user);
    // An earlier add of the user's whose reply was lost: settled first, so that what it
    // replaced is kicked and its entry frees its slot (a device retrying after a 503).
    void this.#unsettled.retryUser(user);
    let reply = await this.#add(user, conn, device, since);
    // The script prunes only expired entries: it cannot see the node registry (another
    // slot). Entries of a node that died count until they expire, so a refusal checks
    // the registry once: when that prunes anything, the user may have room after all.
    if (reply[0] !== 1 && (await this.#prune(user)).pruned > 0) reply = await this.#add(user, conn, device, since);
    if (reply[0] !== 1) return { admitted: false, replaced: [] };
    return { admitted: true, replaced: replacedEntries(reply, 1) };
  }

  /**
   * Takes back a connection {@link add} admitted, whose client left before the
   * replacement took effect (src/gateway/abandoned-handshakes.ts), and writes back the entries it
   * replaced (`presence-withdraw-1.lua`): those connections were never closed. From
   * here `conn` is not one this node holds.
   * @returns true when they were written back; false when a newer connection of the
   *   device was admitted meanwhile (the caller closes them 4002, as it replaced them)
   * @throws PixiuError UNAVAILABLE when Redis fails (nothing may have been written back)
   */
  async withdraw(user: string, conn: string, device: string, replaced: readonly ReplacedEntry[]): Promise<boolean> {
    this.#held.release(user, conn);
    const reply = await redisCall(() => evalScript<number>(this.#redis, PRESENCE_SCRIPTS.withdraw, [this.#keys.conns(user)], [
      conn, device, String(this.#now()), String(this.#opts.ttlMs), ...replaced.flatMap((r) => [r.conn, r.value])]));
    return reply === 1;
  }

  /**
   * Runs `presence-add-2.lua` for a new connection of this node. A presence key of
   * another type fails it before it writes anything, answered as such
   * (src/redis/wrong-type.ts: no retry cures it, so no 503).
   * @throws PixiuError INTERNAL naming the user's presence for a key of the wrong type
   */
  #add(user: string, conn: string, device: string, since: number): Promise<(number | string)[]> {
    const now = this.#now();
    const keys = this.#keys.user(user);
    return keysCall(this.#redis, presenceKeys(user, keys), 'use', () => evalScript<(number | string)[]>(this.#redis, PRESENCE_SCRIPTS.add, [keys.conns, keys.replaced], [
      conn, entryValue(now + this.#opts.ttlMs, this.#opts.node, device, since), device,
      String(now), String(this.#opts.maxPerUser), String(this.#opts.ttlMs)]));
  }

  /**
   * Extends a connection's entry (each server heartbeat), or writes it back when it
   * was lost (Redis lost presence) — unless a newer connection of the same device
   * holds its place (`replaced`: close it 4002) or the user is at the limit without it
   * (`over-limit`), as when it connected (`presence-refresh-4.lua`). On a re-add, an
   * entry of this node whose connection it does not hold is dropped as stale, never
   * taken for a newer connection (Redis came back with older data: the chaos tester's F1).
   * A connection {@link closeConns} marked is never written back nor kept: its entry is
   * deleted and the DELETE's code and reason answered (`presence-refresh-4.lua`), for
   * the caller to close it with (its node missed the kick).
   * @returns `kept`, `readded`, `replaced`, `over-limit`, or the close a DELETE asked for
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async refresh(user: string, conn: string, device: string, since: number): Promise<RefreshOutcome> {
    const now = this.#now();
    const keys = this.#keys.user(user);
    const reply = await redisCall(() => evalScript<number | [number, string]>(this.#redis, PRESENCE_SCRIPTS.refresh, [keys.conns, keys.closed], [
      conn, entryValue(now + this.#opts.ttlMs, this.#opts.node, device, since), String(this.#opts.ttlMs),
      String(now), String(this.#opts.maxPerUser), this.#opts.node, ...this.#held.of(user)]));
    if (Array.isArray(reply)) return { code: Number(reply[0]), reason: String(reply[1]) };
    return reply === 1 ? 'kept' : reply === 0 ? 'readded' : reply === -1 ? 'replaced' : 'over-limit';
  }

  /**
   * Removes a connection's entry (it closed). When that fails, the removal is kept and
   * tried again (every second, when Redis is back, and before the user's next connection
   * is admitted or listed) until the entry would have expired anyway.
   * @throws PixiuError UNAVAILABLE when Redis fails (the removal is then pending)
   */
  async remove(user: string, conn: string): Promise<void> {
    this.#held.release(user, conn);
    try {
      await this.removeConns(user, [conn]);
    } catch (err) {
      // Its last refresh was before now, so its expiry is at most one lifetime away.
      this.#removals.add(user, conn, Date.now() + this.#opts.ttlMs);
      throw err;
    }
  }

  /**
   * Removes the entries of `conns` in one HDEL (the retried removals of connections that
   * closed; {@link closeConns} on a full Redis).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async removeConns(user: string, conns: readonly string[]): Promise<void> {
    if (conns.length > 0) await redisCall(() => this.#redis.hdel(this.#keys.conns(user), ...conns));
  }

  /**
   * Removes the entries of `conns`, connections asked to close by
   * `DELETE /v1/users/{uid}/connections`, and marks them closed with `code` and
   * `reason` for {@link CLOSED_MARK_MS}, in one step (`presence-close-1.lua`): their
   * slots are free at once, also when the node holding them is dead or frozen, and a
   * node that missed the kick closes such a connection at its next {@link refresh}
   * rather than writing its entry back (before, it wrote it back: the connection stayed
   * open and listed for good; the network-fault tester's kick2).
   * Over maxmemory Redis refuses the script whole (the marks grow it): the entries are
   * then removed unmarked (HDEL frees memory, so Redis takes it), as before the marks.
   * @throws PixiuError UNAVAILABLE when Redis fails; nothing may have been removed
   */
  async closeConns(user: string, conns: readonly string[], code: number, reason: string): Promise<void> {
    if (conns.length === 0) return;
    const now = this.#now();
    const keys = this.#keys.user(user);
    try {
      await redisCall(() => evalScript<number>(this.#redis, PRESENCE_SCRIPTS.close, [keys.conns, keys.closed], [
        String(Math.floor(now) + CLOSED_MARK_MS), String(now), String(code), reason, ...conns]));
    } catch (err) {
      if (!isOutOfMemory(err)) throw err;
      await this.removeConns(user, conns);
    }
  }

  /** Removes every entry of `node` for `user` (the node is gone), unless refreshed since it was read. */
  async removeNode(user: string, node: string): Promise<void> {
    await this.#deleteUnchanged(user, (await this.#read(user)).filter(({ entry }) => entry.node === node));
  }

  /** The user's live connections, oldest first; expired, orphaned or stale entries are pruned. */
  async list(user: string): Promise<PresenceEntry[]> {
    void this.#removals.retryUser(user); // runs before the read, as in add()
    return (await this.#prune(user)).live;
  }

  /** Reads the user's entries, deletes the dead ones, and answers the live ones (oldest first) and how many were deleted. */
  async #prune(user: string): Promise<{ live: PresenceEntry[]; pruned: number }> {
    const now = this.#now();
    const all = await this.#read(user);
    const liveNodes = await this.#opts.liveNodes([...new Set(all.map(({ entry }) => entry.node))]);
    const live: PresenceEntry[] = [];
    const dead: ReadEntry[] = [];
    for (const read of all) {
      const e = read.entry;
      const alive = e.node === this.#opts.node ? this.#held.has(user, e.conn) : liveNodes.has(e.node);
      if (e.expiresAt > now && alive) live.push(e);
      else dead.push(read);
    }
    const pruned = await this.#deleteUnchanged(user, dead).catch(() => 0);
    return { live: live.sort((a, b) => a.since - b.since), pruned };
  }

  /** Deletes the entries read, each only while its value is still the one read (`presence-prune-1.lua`); how many went. */
  async #deleteUnchanged(user: string, entries: readonly ReadEntry[]): Promise<number> {
    if (entries.length === 0) return 0;
    const pairs = entries.flatMap(({ entry, value }) => [entry.conn, value]);
    return redisCall(() => evalScript<number>(this.#redis, PRESENCE_SCRIPTS.prune, [this.#keys.conns(user)], pairs));
  }

  async #read(user: string): Promise<ReadEntry[]> {
    const raw = await redisCall(() => this.#redis.hgetall(this.#keys.conns(user)));
    const out: ReadEntry[] = [];
    for (const [conn, value] of Object.entries(raw)) {
      const entry = parseEntry(conn, value);
      if (entry) out.push({ entry, value });
    }
    return out;
  }
}
