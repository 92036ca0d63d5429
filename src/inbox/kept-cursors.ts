/**
 * The ack cursors a rotation kept of older epochs, read for ops (`pixiu inspect inbox`).
 * An epoch change moves each device's cursor out of the acks hash into the user's meta
 * hash as `cursor <device>` = "<seq> <epoch>" (`rotate-7.lua`, `append-13.lua`), so that
 * a device resuming from it is reset rather than taken for a new one (docs/decisions.md
 * "Stored cursors across a new epoch"); the device's first ack in the new epoch deletes
 * it (`ack-7.lua`). The acks hash (`Inbox.cursors`) shows only the current epoch's.
 */
import type { Redis } from 'ioredis';
import { Keys } from '../redis/keys.js';
import { userKeysCall } from '../redis/wrong-type.js';
import { parseKeptCursors } from './codec.js';

/**
 * The cursors a rotation kept for the devices of `uid` that have not acked in the
 * inbox's current epoch since.
 * @param prefix the Redis key prefix (`PIXIU_REDIS_PREFIX`)
 * @returns device → the seq it acked and the epoch that seq counts in; `{}` when none
 * @throws PixiuError INVALID_REQUEST for a bad uid; UNAVAILABLE when Redis fails;
 *   INTERNAL for a key of the user's of the wrong type (src/redis/wrong-type.ts)
 */
export async function readKeptCursors(redis: Redis, prefix: string, uid: string): Promise<Record<string, { seq: number; epoch: string }>> {
  const keys = new Keys(prefix).user(uid);
  return parseKeptCursors(await userKeysCall(redis, uid, keys, () => redis.hgetall(keys.meta)));
}
