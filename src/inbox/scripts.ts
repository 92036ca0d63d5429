/**
 * The inbox's Lua scripts (`lua/*.lua`) and the shapes of their arguments and replies.
 * Loading and calling: src/redis/scripts.ts.
 */
import { scriptSha, type ScriptSpec } from '../redis/scripts.js';

/** The inbox scripts; each file's header documents its KEYS, ARGV and reply. */
export const INBOX_SCRIPTS = {
  /** KEYS and ARGV: {@link AppendArgs}. Replies {@link AppendReply}. */
  append: { file: new URL('./lua/append-13.lua', import.meta.url), numberOfKeys: 5 },
  /** KEYS inbox, meta; ARGV afterSeq, limit. Replies {@link RangeReply}. */
  range: { file: new URL('./lua/range-3.lua', import.meta.url), numberOfKeys: 2 },
  /**
   * KEYS acks, meta; ARGV device, seq, epoch ("" for any), most devices with a cursor. Replies the cursor after, or -1
   * when the epoch given is not the inbox's (none included).
   * Also moves forward or deletes the device's cursor kept from an older epoch (the meta's `cursor <device>`), and
   * makes it for an ack of the epoch the current one replaced (the meta's `lineage`) when the device has none.
   */
  ack: { file: new URL('./lua/ack-7.lua', import.meta.url), numberOfKeys: 2 },
  /**
   * KEYS meta, acks; ARGV the epoch to replace, the new one, the cool-down of a resume-claimed rotation in ms ("0":
   * none), the generation held, the latest seq the claim's read found ("": none), most devices with a cursor. Replies
   * the epoch after ("" when none; the one to replace itself when the cool-down refused it). Keeps the stored
   * cursors in the meta hash with the epoch replaced (`cursor <device>`).
   */
  rotate: { file: new URL('./lua/rotate-7.lua', import.meta.url), numberOfKeys: 2 },
  /** KEYS ids, inbox; ARGV msgId. Replies the MsgID's seq in the inbox, 0 when it is not there. */
  locate: { file: new URL('./lua/locate-2.lua', import.meta.url), numberOfKeys: 2 },
  /**
   * KEYS the inbox generation; ARGV the generation the caller last read ("" for any), the least to set.
   * Replies {generation after, 1 when raised else 0}.
   */
  generationRaise: { file: new URL('./lua/generation-raise-2.lua', import.meta.url), numberOfKeys: 1 },
} as const satisfies Record<string, ScriptSpec>;

/**
 * Arguments of `append-13.lua`: KEYS inbox, meta, ids, conns, acks; ARGV msgId, kind,
 * cap, epoch, nowMs, room, expiresAtMs (the content's), graceMs (how long the keys
 * outlive the last content), generation (the inbox generation the node last read,
 * src/inbox/generation.ts), earlier (the MsgID that must be in the inbox first, ""
 * for none: src/inbox/append-chain.ts), deviceCursors (most devices with a cursor per user:
 * bounds the cursors a rotation keeps of older epochs), entryExpiresAtMs (the entry's `exp`:
 * the record's own `expiresAt`, ms; "" for none).
 */
export type AppendArgs = [
  inbox: string, meta: string, ids: string, conns: string, acks: string,
  msgId: string, kind: string, cap: string, epoch: string, nowMs: string, room: string,
  expiresAtMs: string, graceMs: string, generation: string, earlier: string, deviceCursors: string,
  entryExpiresAtMs: string,
];

/** The whole EVALSHA of `append-13.lua`: its SHA, the number of keys ("5"), then {@link AppendArgs}. */
export type AppendArgv = [sha: string, numberOfKeys: string, ...args: AppendArgs];

/** Where {@link AppendArgv} holds the inbox key, the MsgID and the earlier MsgID. */
export const APPEND_AT = { inbox: 2, msgId: 7, earlier: 16 } as const;

/** `append-13.lua`'s SHA-1, for {@link AppendArgv}. */
export const APPEND_SHA = scriptSha(INBOX_SCRIPTS.append);
/** `append-13.lua`'s number of keys, as EVALSHA takes it. */
export const APPEND_KEYS = String(INBOX_SCRIPTS.append.numberOfKeys);

/** Reply of `append-13.lua`: seq, epoch, 1 when the MsgID was already there, then node ids. */
export type AppendReply = [seq: number, epoch: string, dup: number, ...nodes: string[]];

/** One raw stream entry: `["<seq>-0", [field, value, ...]]`. */
export type RawStreamEntry = [id: string, fields: string[]];

/** Reply of `range-3.lua`: epoch ("" when none), first seq, latest seq, entries, the stream's last entry (null: empty). */
export type RangeReply = [epoch: string, firstSeq: number, latestSeq: number, entries: RawStreamEntry[], last: RawStreamEntry | null];
