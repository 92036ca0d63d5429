/**
 * Room membership (DESIGN.md §8): a sorted set per room, user id → join time (ms). A
 * room exists while it has members. The join time lets a room message go only to
 * those who were members when it was sent — also when it is retried later — so a
 * member added later never receives earlier room messages.
 */
import type { Redis, Result } from 'ioredis';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { defineScripts, type ScriptSpec } from '../redis/scripts.js';

const ADD: ScriptSpec = {
  command: 'pxRoomAddV1', file: new URL('./lua/room-add-1.lua', import.meta.url), numberOfKeys: 1, readOnly: false,
};

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** `room-add-1.lua`: KEYS members; ARGV cap, nowMs, users… Returns [added, size]. */
    pxRoomAddV1(members: string, cap: string, nowMs: string, ...users: string[]): Result<[number, number], Context>;
  }
}

/** One page of members. */
export interface MemberPage {
  /** User ids, in join order. */
  readonly members: string[];
  /** Members in the room. */
  readonly size: number;
  /** Pass as `cursor` for the next page; null at the end. */
  readonly nextCursor: number | null;
}

/** Room membership over Redis. Methods reject with PixiuError UNAVAILABLE when Redis fails. */
export class Rooms {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #cap: number;

  /** @param cap most members per room (setting `roomSizeCap`) */
  constructor(redis: Redis, keys: Keys, cap: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#cap = cap;
    defineScripts(redis, [ADD]);
  }

  /** The room size cap. */
  get cap(): number {
    return this.#cap;
  }

  /**
   * Adds members, all or none.
   * @returns how many were new and the room's size after
   * @throws PixiuError INVALID_REQUEST when the room would exceed the cap (nothing added)
   */
  async add(room: string, users: readonly string[]): Promise<{ added: number; size: number }> {
    const [added, size] = await redisCall(() =>
      this.#redis.pxRoomAddV1(this.#keys.roomMembers(room), String(this.#cap), String(Date.now()), ...users));
    return { added, size };
  }

  /** Removes members (absent ones are ignored). @returns how many were removed and the size after */
  async remove(room: string, users: readonly string[]): Promise<{ removed: number; size: number }> {
    const key = this.#keys.roomMembers(room);
    const [removed, size] = await redisCall(() => Promise.all([this.#redis.zrem(key, ...users), this.#redis.zcard(key)]));
    return { removed, size };
  }

  /** Members in the room (0: no such room). */
  async size(room: string): Promise<number> {
    return redisCall(() => this.#redis.zcard(this.#keys.roomMembers(room)));
  }

  /** A page of members in join order, from `cursor` (an offset). */
  async list(room: string, cursor: number, limit: number): Promise<MemberPage> {
    const key = this.#keys.roomMembers(room);
    const [members, size] = await redisCall(() =>
      Promise.all([this.#redis.zrange(key, String(cursor), String(cursor + limit - 1)), this.#redis.zcard(key)]));
    const next = cursor + members.length;
    return { members, size, nextCursor: next < size ? next : null };
  }

  /** Members who joined at or before `atMs` (the recipients of a room message sent then). */
  async membersAt(room: string, atMs: number): Promise<string[]> {
    return redisCall(() => this.#redis.zrange(this.#keys.roomMembers(room), '-inf', String(atMs), 'BYSCORE'));
  }
}
