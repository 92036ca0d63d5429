/**
 * The key layout of one store partition (DESIGN.md §3). Every key starts with one
 * namespace byte, so each key space is a contiguous range:
 *
 * | key | value (UTF-8) | what |
 * | --- | --- | --- |
 * | `m` + 8 MsgID bytes | record JSON without `id`, beginning `{"expiresAt":` | the message record (`record.ts`); big-endian MsgID bytes, so within one kind key order is counter order |
 * | `c` + client_msg_id (ASCII) | MsgID hex | idempotency index |
 * | `x` + 8-byte BE expiry ms + 8 MsgID bytes | lines of `<MsgID hex><client_msg_id or nothing>` | expiry index, oldest first (below) |
 * | `!counter` | decimal counter | high-water mark of the partition's counter, written in every batch |
 *
 * Expiry index: one entry per batch write and expiry second, not one per record. The
 * records of one batch whose `expiresAt` rounds up to the same whole second share an
 * entry keyed by that second (in ms) and the first of their MsgIDs; its value lists
 * them, each with its client_msg_id so the sweeper can drop the `c` entry without
 * reading the record. At high rates a batch of hundreds of puts thus adds one or two
 * index keys instead of hundreds (a put's cost is mostly per key). A record is swept
 * up to a second after it expires; reads check `expiresAt` itself, so an expired
 * record is never returned.
 *
 * The high-water key is what keeps the counter going after every record has expired
 * and been swept: an id is never reused (DESIGN.md §2, §3).
 */
import { MSG_ID_BYTES } from '../ids/msg-id.js';

const NS_MESSAGE = 0x6d; // 'm'
const NS_CLIENT_ID = 0x63; // 'c'
const NS_EXPIRY = 0x78; // 'x'

/** Key of the counter high-water mark. */
export const HIGH_WATER_KEY = Buffer.from('!counter', 'latin1');

/**
 * Key of a message record, from its MsgID (16 hex digits, already checked).
 * @param into a 9-byte buffer to reuse: a chained batch copies each key as it is
 *   added, so the batch writer fills one buffer again and again
 */
export function messageKey(id: string, into: Buffer = Buffer.allocUnsafe(1 + MSG_ID_BYTES)): Buffer {
  into[0] = NS_MESSAGE;
  into.write(id, 1, MSG_ID_BYTES, 'hex');
  return into;
}

/** Key of an idempotency entry (`clientMsgId` is printable ASCII, checked before). */
export function clientIdKey(clientMsgId: string): Buffer {
  const key = Buffer.allocUnsafe(1 + clientMsgId.length);
  key[0] = NS_CLIENT_ID;
  key.write(clientMsgId, 1, 'latin1');
  return key;
}

/** Key of an expiry-index entry: its expiry (ms) and the first MsgID it lists. */
export function expiryKey(expiresAt: number, firstId: string): Buffer {
  const key = Buffer.allocUnsafe(1 + 8 + MSG_ID_BYTES);
  key[0] = NS_EXPIRY;
  key.writeUInt16BE(0, 1);
  key.writeUIntBE(expiresAt, 3, 6);
  key.write(firstId, 9, MSG_ID_BYTES, 'hex');
  return key;
}

/** The expiry second (in ms) under which a record expiring at `expiresAt` is indexed. */
export function expiryBucket(expiresAt: number): number {
  return Math.ceil(expiresAt / 1000) * 1000;
}

/** One line of an expiry-index value. */
export function expiryLine(id: string, clientMsgId: string | undefined): string {
  return clientMsgId === undefined ? `${id}\n` : `${id}${clientMsgId}\n`;
}

/** The records listed in an expiry-index value. */
export function parseExpiryValue(value: string): { id: string; clientMsgId: string | undefined }[] {
  return value.split('\n').filter((line) => line.length >= 16).map((line) => ({
    id: line.slice(0, 16),
    clientMsgId: line.length > 16 ? line.slice(16) : undefined,
  }));
}

/** The range of expiry-index keys whose records have all expired at `nowMs`. */
export function expiredRange(nowMs: number): { gte: Buffer; lt: Buffer } {
  const lt = Buffer.alloc(9);
  lt[0] = NS_EXPIRY;
  lt.writeUIntBE(nowMs + 1, 3, 6);
  return { gte: Buffer.from([NS_EXPIRY]), lt };
}

/** The range of record keys of one partition and kind, for finding the last one. */
export function kindRange(partition: number, kind: number): { gte: Buffer; lt: Buffer } {
  return {
    gte: Buffer.from([NS_MESSAGE, partition, kind]),
    lt: Buffer.from([NS_MESSAGE, partition, kind + 1]),
  };
}

/** The counter inside a record key. */
export function counterOfMessageKey(key: Buffer): number {
  return key.readUIntBE(3, 6);
}

/** The ranges of the three key spaces, for tools and tests that count keys. */
export const KEY_SPACES = Object.freeze({
  message: { gte: Buffer.from([NS_MESSAGE]), lt: Buffer.from([NS_MESSAGE + 1]) },
  clientId: { gte: Buffer.from([NS_CLIENT_ID]), lt: Buffer.from([NS_CLIENT_ID + 1]) },
  expiry: { gte: Buffer.from([NS_EXPIRY]), lt: Buffer.from([NS_EXPIRY + 1]) },
});
