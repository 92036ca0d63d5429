/**
 * Compare-and-delete (`lua/delete-if-1.lua`): drops a key only while it still holds
 * the value this process wrote, so a value another writer put in its place is kept.
 * Used for store leases (src/cluster/partition-claims.ts) and pending `client_msg_id`
 * claims (src/cluster/client-id-claims.ts: after a failed write, and after a claim
 * Redis did not answer; it sends the script's EVALSHA itself, at once).
 */
import type { Redis } from 'ioredis';
import { redisCall } from './client.js';
import { evalScript, type ScriptSpec } from './scripts.js';

/** The script: KEYS key; ARGV the value it must hold. Replies 1 when deleted, else 0. */
export const DELETE_IF: ScriptSpec = { file: new URL('./lua/delete-if-1.lua', import.meta.url), numberOfKeys: 1 };

/**
 * Deletes `key` if it holds exactly `value` (src/redis/scripts.ts `evalScript`). Its
 * users load {@link DELETE_IF} (`loadScripts`) when they are built.
 * @returns true when it did, false when the key was absent or held something else
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function deleteIf(redis: Redis, key: string, value: string): Promise<boolean> {
  return (await redisCall(() => evalScript<number>(redis, DELETE_IF, [key], [value]))) === 1;
}
