/**
 * MsgID: the 64-bit identifier of one stored message (DESIGN.md §2).
 *
 * Layout, most significant first: 8-bit partition, 8-bit kind, 48-bit per-partition
 * counter. Written as 16 lower-case hex digits (a JSON number cannot hold 64 bits).
 * Its 8 big-endian bytes are the store key, so within one partition and kind, key
 * order is counter order.
 */
import { invalid } from '../errors.js';

/** Message kinds (DESIGN.md §2). */
export const MsgKind = Object.freeze({ user: 1, room: 2, broadcast: 3, channel: 4 } as const);
/** A kind's number, 1..4. */
export type MsgKind = (typeof MsgKind)[keyof typeof MsgKind];
/** A kind's name. */
export type MsgKindName = keyof typeof MsgKind;

/** A kind's name as the API writes it (`user`, `room`, …). */
export function kindName(kind: MsgKind): MsgKindName {
  return (Object.keys(MsgKind) as MsgKindName[]).find((k) => MsgKind[k] === kind) as MsgKindName;
}

/** Largest counter: 2^48 - 1. */
export const MAX_COUNTER = 2 ** 48 - 1;
/** Bytes in an encoded MsgID. */
export const MSG_ID_BYTES = 8;

/**
 * A MsgID's shape only, 16 lower-case hex digits: the pattern of the answers' schemas,
 * which fast-json-stringify checks when it picks an `anyOf` branch (the whole rule,
 * {@link MSG_ID_PATTERN}, is the OpenAPI document's only: portable-patterns.ts).
 */
export const MSG_ID_HEX_PATTERN = '^[0-9a-f]{16}$';

const HEX_ID = new RegExp(MSG_ID_HEX_PATTERN);

/**
 * The whole MsgID rule ({@link tryDecodeMsgId}) as a regular expression, for the OpenAPI
 * document: 16 lower-case hex digits, digits 3–4 a kind 01–04, the last 12 a counter
 * that is not all 0 — the counter written as 12 alternatives (its first digit other
 * than 0 after 0 to 11 zeros), not a lookahead, so that every regex engine (RE2, Python,
 * Java, ECMA-262) reads it alike. The server checks ids with {@link decodeMsgId}, whose
 * errors say which part is wrong; a unit test checks both agree.
 */
export const MSG_ID_PATTERN = `^[0-9a-f]{2}0[1-4](?:${Array.from({ length: 12 }, (_, zeros) =>
  `${zeros === 0 ? '' : zeros === 1 ? '0' : `0{${zeros}}`}[1-9a-f]${zeros === 11 ? '' : `[0-9a-f]{${11 - zeros}}`}`).join('|')})$`;

/** The three fields of a MsgID. */
export interface MsgIdParts {
  /** 0..255 */
  readonly partition: number;
  readonly kind: MsgKind;
  /** 1..2^48-1 (0 is never issued) */
  readonly counter: number;
}

/**
 * Whether `value` is one of the {@link MsgKind} numbers, 1..4 (exactly: 1.5, '1' and NaN
 * are none). For a kind read from anywhere: a MsgID's digits, a stream entry, a record.
 */
export function isMsgKind(value: unknown): value is MsgKind {
  return value === MsgKind.user || value === MsgKind.room || value === MsgKind.broadcast || value === MsgKind.channel;
}

/**
 * Encodes parts into the 16-hex-digit MsgID.
 * @throws RangeError when a field is out of range (a programming error, not input)
 */
export function encodeMsgId(parts: MsgIdParts): string {
  const { partition, kind, counter } = parts;
  if (!Number.isInteger(partition) || partition < 0 || partition > 255) throw new RangeError(`partition ${partition} out of range`);
  if (!isMsgKind(kind)) throw new RangeError(`kind ${String(kind)} out of range`);
  if (!Number.isInteger(counter) || counter < 1 || counter > MAX_COUNTER) throw new RangeError(`counter ${counter} out of range`);
  return msgIdPrefix(partition, kind) + counter.toString(16).padStart(12, '0');
}

/**
 * A MsgID's first 4 hex digits: its partition and kind bytes (DESIGN.md §2), unchecked
 * (callers check the range, as {@link encodeMsgId} does, or build them once per partition).
 */
export function msgIdPrefix(partition: number, kind: number): string {
  return partition.toString(16).padStart(2, '0') + kind.toString(16).padStart(2, '0');
}

/**
 * Decodes a MsgID string. Use at the edge for foreign input.
 * @throws PixiuError INVALID_REQUEST when `id` is not 16 lower-case hex digits with a
 *   known kind and a non-zero counter
 */
export function decodeMsgId(id: unknown): MsgIdParts {
  const parts = typeof id === 'string' ? tryDecodeMsgId(id) : undefined;
  if (parts === undefined) throw invalid(`not a message id: ${JSON.stringify(String(id).slice(0, 40))} (${whyNotMsgId(id)})`);
  return parts;
}

/** What is wrong with something that is not a MsgID, for the error message. */
function whyNotMsgId(id: unknown): string {
  if (typeof id !== 'string' || !HEX_ID.test(id)) return 'expected 16 lower-case hex digits';
  const kind = id.slice(2, 4);
  if (!isMsgKind(parseInt(kind, 16))) return `digits 3-4 are the kind, 01-04 (user, room, broadcast, channel), not ${kind}`;
  return 'the last 12 digits are a counter, never 0';
}

/** Like {@link decodeMsgId} but answers `undefined` instead of throwing. */
export function tryDecodeMsgId(id: string): MsgIdParts | undefined {
  if (!HEX_ID.test(id)) return undefined;
  const partition = parseInt(id.slice(0, 2), 16);
  const kind = parseInt(id.slice(2, 4), 16);
  const counter = parseInt(id.slice(4), 16);
  if (!isMsgKind(kind) || counter < 1) return undefined;
  return { partition, kind, counter };
}

/** The 8 big-endian bytes of a valid MsgID string (the store key). */
export function msgIdToBytes(id: string): Buffer {
  return Buffer.from(id, 'hex');
}

/** The MsgID string of 8 big-endian bytes. */
export function msgIdFromBytes(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, MSG_ID_BYTES).toString('hex');
}
