/**
 * Compare-and-delete (`lua/delete-if-1.lua`): drops a key only while it still holds
 * the value this process wrote, so a value another writer put in its place is kept.
 * Used for store leases (src/cluster/partition-claims.ts) and pending `client_msg_id`
 * claims (src/cluster/client-id-claims.ts: after a failed write, and after a claim
 * Redis did not answer; it sends the script's EVALSHA itself, at once).
 */
import type { Redis, Result } from 'ioredis';
import { redisCall } from './client.js';
import type { ScriptSpec } from './scripts.js';

/**
 * The script, for its users' `defineScripts` when they are built: defined at first use
 * instead, in the tick of another command on the client, the command joined that
 * command's auto-pipeline, which lacked it, and the pipeline's answer threw an uncaught
 * TypeError (see defineScripts).
 */
export const DELETE_IF: ScriptSpec = {
  command: 'pxDeleteIfV1', file: new URL('./lua/delete-if-1.lua', import.meta.url), numberOfKeys: 1, readOnly: false,
};

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** `delete-if-1.lua`: KEYS key; ARGV the value it must hold. 1 when deleted, else 0. */
    pxDeleteIfV1(key: string, value: string): Result<number, Context>;
  }
}

/**
 * Deletes `key` if it holds exactly `value`. The client must have {@link DELETE_IF}
 * defined (`defineScripts`) before.
 * @returns true when it did, false when the key was absent or held something else
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function deleteIf(redis: Redis, key: string, value: string): Promise<boolean> {
  return (await redisCall(() => redis.pxDeleteIfV1(key, value))) === 1;
}
