/**
 * The presence scripts (`lua/*.lua`). Loading and calling: src/redis/scripts.ts.
 */
import type { Redis } from 'ioredis';
import { defineScripts, type ScriptSpec } from '../redis/scripts.js';

/** The presence scripts; each file's header documents its KEYS, ARGV and reply. */
export const PRESENCE_SCRIPTS = {
  /** KEYS conns; ARGV conn, entry, device, nowMs, limit, ttlMs. Replies 1 and the replaced conns and their nodes, or 0 (over the limit). */
  add: { command: 'pxPresenceAddV1', file: new URL('./lua/presence-add-1.lua', import.meta.url), numberOfKeys: 1, readOnly: false },
  /** KEYS conns; ARGV conn, entry, ttlMs, nowMs, limit, node, the user's conns this node holds… Replies 1 kept, 0 re-added, -1 replaced, -2 over the limit. */
  refresh: { command: 'pxPresenceRefreshV3', file: new URL('./lua/presence-refresh-3.lua', import.meta.url), numberOfKeys: 1, readOnly: false },
  /** KEYS conns; ARGV pairs of conn and the entry value read. Replies how many were deleted. */
  prune: { command: 'pxPresencePruneV1', file: new URL('./lua/presence-prune-1.lua', import.meta.url), numberOfKeys: 1, readOnly: false },
} as const satisfies Record<string, ScriptSpec>;

/** Registers the presence scripts on `redis` (once per client). */
export function definePresenceScripts(redis: Redis): void {
  defineScripts(redis, Object.values(PRESENCE_SCRIPTS));
}
