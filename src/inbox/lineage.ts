/**
 * An inbox epoch's lineage: which epoch it replaced and up to which seq it continues
 * that one's numbering (the meta hash's `lineage` field, written by `rotate-7.lua` and
 * by `append-13.lua`'s generation rotation; src/redis/keys.ts). A rotation keeps the
 * stream: seqs 1..`through` of the new epoch are the old one's as Redis held them then,
 * and the numbering goes on. An epoch created afresh (Redis lost the inbox, or it
 * expired) has none: its seqs restart and continue nothing.
 *
 * Delivery reads it only to word the `trimmed` gap that follows a `reset`: the part of
 * it a device is known to have had under the old epoch goes out marked `redelivered`,
 * the rest as news (DESIGN.md §11; docs/protocol.md "Why a gap"; docs/decisions.md
 * "Redis with less than it had").
 */
import type { Redis } from 'ioredis';
import type { UserKeys } from '../redis/keys.js';
import { userKeysCall } from '../redis/wrong-type.js';

/** An epoch and the one it replaced, whose seqs up to `through` it continues. */
export interface EpochLineage {
  /** The epoch this lineage is about (the inbox's when read). */
  readonly epoch: string;
  /** The epoch it replaced. */
  readonly replaced: string;
  /** The latest seq assigned under `replaced` when it was replaced (≥ 0): seqs up to it mean the same messages under both. */
  readonly through: number;
}

/**
 * Parses a meta hash's `lineage` ("<epoch> <replaced> <through>") for the inbox's
 * current `epoch`. One that names another epoch (left by an earlier rotation: an older
 * node's script rotated since without writing one) or is malformed is none.
 * @returns undefined when the inbox's epoch has no known lineage
 */
export function parseLineage(epoch: string | null | undefined, raw: string | null | undefined): EpochLineage | undefined {
  if (typeof epoch !== 'string' || epoch === '' || typeof raw !== 'string') return undefined;
  const [of, replaced, through, ...rest] = raw.split(' ');
  if (of !== epoch || replaced === undefined || replaced === '' || rest.length > 0 || !/^\d{1,15}$/.test(through ?? '')) return undefined;
  return { epoch, replaced, through: Number(through) };
}

/**
 * Reads the lineage of a user's inbox epoch (one HMGET of its meta hash: the epoch and
 * its lineage as one snapshot).
 * @returns undefined when the inbox has none (no inbox, an epoch created afresh, or one
 *   an older script rotated to)
 * @throws PixiuError UNAVAILABLE when Redis fails; INTERNAL for a meta key of the wrong type (wrong-type.ts)
 */
export async function readLineage(redis: Redis, uid: string, keys: UserKeys): Promise<EpochLineage | undefined> {
  const [epoch, raw] = await userKeysCall(redis, uid, keys, () => redis.hmget(keys.meta, 'epoch', 'lineage'));
  return parseLineage(epoch, raw);
}
