/**
 * Which partition a new message goes to (DESIGN.md §3): `hash(client_msg_id)` when
 * one is given, so every retry of a message meets its idempotency entry in the same
 * partition; else `hash(first recipient or room)`; a random partition when there is
 * neither (a broadcast).
 *
 * The hash is part of the on-disk contract: changing it (or the partition count)
 * sends retries of earlier messages to another partition, where their idempotency
 * entry is not. Reads do not depend on it: they route by the MsgID's partition byte.
 */
import type { NewMessage } from './record.js';

/** FNV-1a, 32 bits, over the string's UTF-16 code units; stable across releases. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * @param msg the new message
 * @param partitions the partition count P (1..256)
 * @returns a partition number in 0..P-1
 */
export function choosePartition(msg: NewMessage, partitions: number): number {
  if (msg.clientMsgId !== undefined) return partitionOfClientMsgId(msg.clientMsgId, partitions);
  const key = msg.to?.[0] ?? msg.room;
  if (key === undefined) return Math.floor(Math.random() * partitions);
  return fnv1a32(key) % partitions;
}

/**
 * The partition where the message stored under `clientMsgId` is, and where its
 * retries go ({@link choosePartition}).
 * @param partitions the partition count P (1..256)
 * @returns a partition number in 0..P-1
 */
export function partitionOfClientMsgId(clientMsgId: string, partitions: number): number {
  return fnv1a32(clientMsgId) % partitions;
}
