/**
 * Compare-and-delete (`lua/delete-if-1.lua`): drops a key only while it still holds
 * the value this process wrote, so a value another writer put in its place is kept.
 * Used for store leases (src/cluster/partition-claims.ts) and pending `client_msg_id`
 * claims (src/cluster/client-id-claims.ts).
 */
import type { Redis, Result } from 'ioredis';
import { redisCall } from './client.js';
import { defineScripts, type ScriptSpec } from './scripts.js';

const DELETE_IF: ScriptSpec = {
  command: 'pxDeleteIfV1', file: new URL('./lua/delete-if-1.lua', import.meta.url), numberOfKeys: 1, readOnly: false,
};

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** `delete-if-1.lua`: KEYS key; ARGV the value it must hold. 1 when deleted, else 0. */
    pxDeleteIfV1(key: string, value: string): Result<number, Context>;
  }
}

/**
 * Deletes `key` if it holds exactly `value`.
 * @returns true when it did, false when the key was absent or held something else
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function deleteIf(redis: Redis, key: string, value: string): Promise<boolean> {
  defineScripts(redis, [DELETE_IF]);
  return (await redisCall(() => redis.pxDeleteIfV1(key, value))) === 1;
}
