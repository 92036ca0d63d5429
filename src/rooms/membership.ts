/**
 * Room membership (DESIGN.md §8): a sorted set per room, user id → join slot (the join
 * time in ms × 1000 plus a counter: see `lua/room-add-5.lua`). A room exists while it
 * has members. The slot orders members by when they joined and lets a room message go
 * only to those who were members when it was sent — also when it is retried later — so
 * a member added later never receives earlier room messages.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { wordedPattern } from '../api/pattern-rules.js';
import { PixiuError } from '../errors.js';
import { redisNowMs } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { loadScripts, evalScript, type ScriptSpec } from '../redis/scripts.js';
import { keysCall, roomKeys } from '../redis/wrong-type.js';

/** The room scripts; each header documents KEYS, ARGV and reply. */
export const ROOM_SCRIPTS = {
  /** KEYS members, cut, top; ARGV cap, nowMs, ahead ('1'/'0'), users…; replies [added, size], or [-1, ms]: retry then. */
  add: { file: new URL('./lua/room-add-5.lua', import.meta.url), numberOfKeys: 3 },
  /** KEYS members, cut; replies a room message's ts, ms. */
  time: { file: new URL('./lua/room-time-1.lua', import.meta.url), numberOfKeys: 2 },
} as const satisfies Record<string, ScriptSpec>;

/** Slots per millisecond of join time (`lua/room-add-5.lua`). */
const SLOTS_PER_MS = 1000;

/** Longest wait for a millisecond whose join slots are free, ms; past it the slots are taken ahead of the clock. */
const MAX_SLOT_WAIT_MS = 1000;

/** A page cursor: the join slot of the last member listed, a decimal integer. */
export const MEMBER_CURSOR_PATTERN = wordedPattern('^[0-9]{1,17}$', 'the next_cursor of an earlier page (1–17 decimal digits)');

/** The error for a room without members: it does not exist (DESIGN.md §8). */
export function roomNotFound(room: string): PixiuError {
  return new PixiuError('NOT_FOUND', `no room ${room} (a room exists while it has members)`);
}

/** One page of members. */
export interface MemberPage {
  /** User ids, in join order. */
  readonly members: string[];
  /** Members in the room. */
  readonly size: number;
  /**
   * Pass as `cursor` for the next page; null at the end. It is the join slot of the
   * last member listed, so members leaving or joining between pages make the next page
   * neither skip nor repeat anyone (newcomers come last: a new slot is above every slot
   * the room gave before, that of a member removed since included, `lua/room-add-5.lua`).
   */
  readonly nextCursor: string | null;
}

/**
 * Room membership over Redis. Methods reject with PixiuError UNAVAILABLE when Redis
 * fails, and INTERNAL naming the room when a key of it holds another type than Pixiu
 * writes there (src/redis/wrong-type.ts: no retry cures it).
 */
export class Rooms {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #cap: number;

  /** @param cap most members per room (setting `roomSizeCap`) */
  constructor(redis: Redis, keys: Keys, cap: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#cap = cap;
    loadScripts(redis, Object.values(ROOM_SCRIPTS));
  }

  /** The room size cap. */
  get cap(): number {
    return this.#cap;
  }

  /**
   * Now on Redis's clock, ms since the epoch: the one clock of join slots and of room
   * messages' times. Each node's own clock would do only if every node's agreed: a
   * member added through a node whose clock runs ahead got a slot after the time of a
   * room message sent later through another node, and was left out of it (and a member
   * added later, through a node behind, got a retry of it).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async now(): Promise<number> {
    return redisNowMs(this.#redis);
  }

  /**
   * The `ts` of a room message sent now, ms since the epoch (`lua/room-time-1.lua`):
   * Redis's clock, or the millisecond of the room's newest join slot when that is later
   * (a slot taken while Redis's clock read later: a failover, an NTP step back; on the
   * clock alone, members whose add had been answered were left out of every room message
   * until the clock caught up). It becomes the room's cut: members added after this call
   * get slots above it, so they are not recipients of the message's retries either. The
   * `ts` is stored with the message, so a retry goes to the same members.
   * @throws PixiuError UNAVAILABLE when Redis fails; INTERNAL naming the room for a key of it of the wrong type
   */
  async messageTime(room: string): Promise<number> {
    return this.#call(room, () => evalScript<number>(this.#redis, ROOM_SCRIPTS.time, [this.#keys.roomMembers(room), this.#keys.roomCut(room)], []));
  }

  /**
   * Adds members, all or none.
   * @returns how many were new and the room's size after
   * @throws PixiuError INVALID_REQUEST when the room would exceed the cap (nothing added)
   */
  async add(room: string, users: readonly string[]): Promise<{ added: number; size: number }> {
    const keys = [this.#keys.roomMembers(room), this.#keys.roomCut(room), this.#keys.roomTop(room)];
    const addAt = (now: number, ahead: '0' | '1'): Promise<[number, number]> =>
      this.#call(room, () => evalScript<[number, number]>(this.#redis, ROOM_SCRIPTS.add, keys, [String(this.#cap), String(now), ahead, ...users]));
    const started = performance.now();
    for (;;) {
      const now = await this.now();
      const [added, at] = await addAt(now, '0');
      if (added >= 0) return { added, size: at };
      // The millisecond's join slots are taken, or a room message was sent in it
      // (`lua/room-add-5.lua`): wait for the one the new members fit in. Far ahead (slots
      // or a cut taken while Redis's clock read later, or by an older release on a
      // node's clock), take the slots anyway rather than wait for that clock.
      // So too after a second of waits: room messages sent every millisecond would
      // otherwise move the cut on before each try.
      const waitMs = at - now;
      if (waitMs > MAX_SLOT_WAIT_MS || performance.now() - started > MAX_SLOT_WAIT_MS) {
        const [forced, size] = await addAt(now, '1');
        return { added: forced, size };
      }
      await sleep(Math.max(1, waitMs));
    }
  }

  /** Removes members (absent ones are ignored). @returns how many were removed and the size after */
  async remove(room: string, users: readonly string[]): Promise<{ removed: number; size: number }> {
    const key = this.#keys.roomMembers(room);
    const [removed, size] = await this.#call(room, () => Promise.all([this.#redis.zrem(key, ...users), this.#redis.zcard(key)]));
    return { removed, size };
  }

  /** Members in the room (0: no such room). */
  async size(room: string): Promise<number> {
    return this.#call(room, () => this.#redis.zcard(this.#keys.roomMembers(room)));
  }

  /**
   * A page of members in join order, after `cursor` (a {@link MemberPage.nextCursor};
   * undefined: from the first member).
   */
  async list(room: string, cursor: string | undefined, limit: number): Promise<MemberPage> {
    const key = this.#keys.roomMembers(room);
    const from = cursor === undefined ? '-inf' : `(${cursor}`;
    // One more than asked tells whether another page follows.
    const [flat, size] = await this.#call(room, () => Promise.all([
      this.#redis.zrange(key, from, '+inf', 'BYSCORE', 'LIMIT', 0, limit + 1, 'WITHSCORES'),
      this.#redis.zcard(key),
    ]));
    const members: string[] = [];
    let lastSlot = '';
    for (let i = 0; i + 1 < flat.length && members.length < limit; i += 2) {
      members.push(flat[i] as string);
      // Re-formatted: how Redis writes a double score differs across versions.
      lastSlot = String(Number(flat[i + 1]));
    }
    return { members, size, nextCursor: flat.length > 2 * limit ? lastSlot : null };
  }

  /**
   * Members who joined at or before `atMs` (the recipients of a room message sent then),
   * in join order.
   */
  async membersAt(room: string, atMs: number): Promise<string[]> {
    const below = (Math.floor(atMs) + 1) * SLOTS_PER_MS;
    return this.#call(room, () => this.#redis.zrange(this.#keys.roomMembers(room), '-inf', `(${below}`, 'BYSCORE'));
  }

  /**
   * Runs a Redis call on `room`'s keys: Redis's failures become UNAVAILABLE, a key of
   * the room's of the wrong type (`WRONGTYPE`) an INTERNAL naming the room, logged with
   * the key (src/redis/wrong-type.ts).
   */
  #call<T>(room: string, call: () => Promise<T>): Promise<T> {
    return keysCall(this.#redis, roomKeys(room, this.#keys), 'use', call);
  }
}
