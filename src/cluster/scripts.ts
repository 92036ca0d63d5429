/**
 * The presence scripts (`lua/*.lua`) and their typed commands. Loading and
 * registration: src/redis/scripts.ts.
 */
import type { Redis, Result } from 'ioredis';
import { defineScripts, type ScriptSpec } from '../redis/scripts.js';

/** The presence scripts; each file's header documents its KEYS, ARGV and reply. */
export const PRESENCE_SCRIPTS = {
  add: { command: 'pxPresenceAddV1', file: new URL('./lua/presence-add-1.lua', import.meta.url), numberOfKeys: 1, readOnly: false },
  refresh: { command: 'pxPresenceRefreshV3', file: new URL('./lua/presence-refresh-3.lua', import.meta.url), numberOfKeys: 1, readOnly: false },
  prune: { command: 'pxPresencePruneV1', file: new URL('./lua/presence-prune-1.lua', import.meta.url), numberOfKeys: 1, readOnly: false },
} as const satisfies Record<string, ScriptSpec>;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** `presence-add-1.lua`: KEYS conns; ARGV conn, entry, device, nowMs, limit, ttlMs. */
    pxPresenceAddV1(conns: string, conn: string, entry: string, device: string, nowMs: string, limit: string, ttlMs: string): Result<(number | string)[], Context>;
    /** `presence-refresh-3.lua`: KEYS conns; ARGV conn, entry, ttlMs, nowMs, limit, node, the user's conns this node holds… */
    pxPresenceRefreshV3(conns: string, conn: string, entry: string, ttlMs: string, nowMs: string, limit: string, node: string, ...held: string[]): Result<number, Context>;
    /** `presence-prune-1.lua`: KEYS conns; ARGV pairs of conn and the entry value read. Returns how many were deleted. */
    pxPresencePruneV1(conns: string, ...pairs: string[]): Result<number, Context>;
  }
}

/** Registers the presence scripts on `redis` (once per client). */
export function definePresenceScripts(redis: Redis): void {
  defineScripts(redis, Object.values(PRESENCE_SCRIPTS));
}
