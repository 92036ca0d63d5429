/**
 * The presence scripts (`lua/*.lua`). Loading and calling: src/redis/scripts.ts.
 */
import type { ScriptSpec } from '../redis/scripts.js';

/** The presence scripts; each file's header documents its KEYS, ARGV and reply. */
export const PRESENCE_SCRIPTS = {
  /** KEYS conns, replaced; ARGV conn, entry, device, nowMs, limit, ttlMs. Replies 1 and the replaced conns and their entries (recorded in replaced), or 0 (over the limit). */
  add: { file: new URL('./lua/presence-add-2.lua', import.meta.url), numberOfKeys: 2 },
  /** KEYS conns, replaced; ARGV nowMs, ttlMs, then conn and sinceMs of each add whose reply was lost. Writes back a replaced connection newer than its add; replies the other conns those adds replaced and their entries. */
  settle: { file: new URL('./lua/presence-settle-2.lua', import.meta.url), numberOfKeys: 2 },
  /** KEYS conns, closed; ARGV conn, entry, ttlMs, nowMs, limit, node, the user's conns this node holds… Replies 1 kept, 0 re-added, -1 replaced, -2 over the limit, or [code, reason] closed by a DELETE. */
  refresh: { file: new URL('./lua/presence-refresh-4.lua', import.meta.url), numberOfKeys: 2 },
  /** KEYS conns, closed; ARGV untilMs, nowMs, code, reason, the conns. Replies how many entries were deleted. */
  close: { file: new URL('./lua/presence-close-1.lua', import.meta.url), numberOfKeys: 2 },
  /** KEYS conns; ARGV conn, device, nowMs, ttlMs, pairs of a replaced conn and its entry. Replies 1 written back, 0 a newer entry of the device. */
  withdraw: { file: new URL('./lua/presence-withdraw-1.lua', import.meta.url), numberOfKeys: 1 },
  /** KEYS conns; ARGV pairs of conn and the entry value read. Replies how many were deleted. */
  prune: { file: new URL('./lua/presence-prune-1.lua', import.meta.url), numberOfKeys: 1 },
} as const satisfies Record<string, ScriptSpec>;
