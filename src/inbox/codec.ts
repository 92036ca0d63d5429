/**
 * The inbox scripts' arguments and replies (src/inbox/inbox.ts; each script's header
 * in lua/ documents its KEYS, ARGV and reply): the checks run before an argument is
 * sent, the epochs an append offers, and the replies read into entries and results.
 * No I/O.
 */
import { randomBytes } from 'node:crypto';
import { PixiuError, invalid } from '../errors.js';
import { isMsgKind, type MsgKind } from '../ids/msg-id.js';
import { SETTINGS } from '../config/settings.js';
import type { RawStreamEntry } from './scripts.js';

/** A device id (DESIGN.md §2): 1–64 chars of `[A-Za-z0-9._:-]`. */
export const DEVICE_RULE = /^[A-Za-z0-9._:-]{1,64}$/;
/** A MsgID as written (DESIGN.md §2): 16 lower-case hex digits. */
const MSG_ID_RULE = /^[0-9a-f]{16}$/;
/** Longest room id stored with an entry, in UTF-16 code units. */
const MAX_ROOM_LENGTH = 256;
/**
 * The content expiry assumed for an append given none: the longest a message may be
 * kept (the `messageTtl` setting's bound, 30 days) from now, so keys never go before
 * content they point to.
 */
export const LONGEST_CONTENT_MS = SETTINGS.messageTtlMs.max;

/** A kind as the script's ARGV, by kind number. */
export const KIND_ARG: Record<MsgKind, string> = { 1: '1', 2: '2', 3: '3', 4: '4' };

/** Outcome of an inbox append (src/inbox/inbox.ts `Inbox.append`). */
export interface AppendResult {
  /** The MsgID's position in the user's inbox, ≥ 1. */
  readonly seq: number;
  /** The inbox epoch at the time of the append (created by it if the inbox was new). */
  readonly epoch: string;
  /**
   * True when the MsgID was already in the retained window: `seq` is the first
   * append's and nothing was written. A MsgID already trimmed away is appended anew.
   */
  readonly duplicate: boolean;
  /**
   * Nodes holding a live connection of the user, read from presence in the same
   * script (DESIGN.md §4), to notify; for a duplicate too (its first append's notify
   * may never have gone out: the reply was lost).
   */
  readonly nodes: readonly string[];
}

/** One inbox entry. */
export interface InboxEntry {
  /** Position in the user's inbox, ≥ 1 (DESIGN.md §2). */
  readonly seq: number;
  /** The MsgID, 16 lower-case hex digits. */
  readonly id: string;
  /** The message kind, as given to `Inbox.append`. */
  readonly kind: MsgKind;
  /** The room the message was sent to, for room messages. */
  readonly room?: string;
  /**
   * When the message's record expires, ms since the Unix epoch: its `expiresAt`, written
   * in the entry (`exp`) by append-13.lua and later. A reader takes the entry for
   * expired once it is at or before now, without reading the record (src/delivery/entry-records.ts).
   * Absent: an entry an older release wrote, or whose `exp` is not a non-negative safe
   * integer (set by hand): the store is asked, as before.
   */
  readonly exp?: number;
  /** Never set: tells it from a {@link MalformedEntry}. */
  readonly malformed?: undefined;
}

/**
 * An entry of a user's inbox stream that is not what the append script writes (an
 * operator's or a tool's `XADD`, a script of another release): its `id` is not a
 * MsgID, its `kind` none of the four, or its stream ID not `<seq>-0` with seq ≥ 1. It
 * names no message: delivery and history give its seq as a gap, reason
 * `undeliverable`, and go on after it (docs/decisions.md "Malformed inbox entries";
 * before, reading it threw, and delivery retried that read for good: DESIGN.md §5,
 * never a stall).
 */
export interface MalformedEntry {
  /**
   * The seq its stream ID `<seq>-<n>` gives. At 0 (`0-<n>`, below every seq) every
   * reader is past it (cursors are ≥ 0), and at the seq of the entry before it
   * (`<seq>-<n>`, n > 0, after `<seq>-0`) that one answered for the seq: no gap then.
   */
  readonly seq: number;
  /**
   * None: ''. A store read of it answers null (`RecordReader.getMany`: a malformed id
   * is no record); readers look at {@link malformed} before the record.
   */
  readonly id: '';
  /** Always true: what tells it from an {@link InboxEntry}. */
  readonly malformed: true;
}

/** An entry of a page of the inbox (`Inbox.range`): a message's, or a {@link MalformedEntry}. */
export type PageEntry = InboxEntry | MalformedEntry;

/** Random bytes per epoch: 9 bytes give 12 base64url characters (72 bits). */
const EPOCH_BYTES = 9;
/** Epochs drawn per refill: one `randomBytes` call costs microseconds, a slice nanoseconds. */
const EPOCH_POOL = 1024;
let epochPool = Buffer.alloc(0);
let epochOffset = 0;

/**
 * A short random epoch candidate. Every append sends one (the script keeps it only
 * when it creates the inbox), so they are cut from a pooled random buffer.
 */
export function newEpoch(): string {
  if (epochOffset + EPOCH_BYTES > epochPool.length) {
    epochPool = randomBytes(EPOCH_BYTES * EPOCH_POOL);
    epochOffset = 0;
  }
  const epoch = epochPool.toString('base64url', epochOffset, epochOffset + EPOCH_BYTES);
  epochOffset += EPOCH_BYTES;
  return epoch;
}

/** What an append may carry besides its MsgID and kind. */
export interface AppendExtra {
  /** The room of a room message, 1–256 chars. */
  readonly room?: string;
  /**
   * When the message's content expires, ms since the Unix epoch (its record's
   * `expiresAt`): the inbox keys are kept until at least then (retention). Default: 30
   * days from now, the longest content is kept.
   */
  readonly expiresAt?: number;
}

/** @throws PixiuError INVALID_REQUEST when an append argument is malformed */
export function checkAppend(msgId: string, kind: MsgKind, extra: AppendExtra | undefined): void {
  if (!MSG_ID_RULE.test(msgId)) throw invalid('msg id must be 16 lower-case hex digits');
  if (!isMsgKind(kind)) throw invalid('kind must be 1, 2, 3 or 4');
  const room = extra?.room;
  if (room !== undefined && (typeof room !== 'string' || room.length === 0 || room.length > MAX_ROOM_LENGTH)) {
    throw invalid(`room must be 1-${MAX_ROOM_LENGTH} characters`);
  }
  const expiresAt = extra?.expiresAt;
  if (expiresAt !== undefined && (!Number.isSafeInteger(expiresAt) || expiresAt < 0)) {
    throw invalid('expires at must be a non-negative integer (ms since the Unix epoch)');
  }
}

/** The append script's two ARGVs about the content's expiry (append-13.lua ARGV[7], ARGV[12]). */
export interface ExpiresArgs {
  /** How long the inbox keys are kept at least (ARGV[7]): the given expiry, else the longest from now. */
  readonly keep: string;
  /** The entry's `exp` (ARGV[12]): the given expiry exactly, "" when none is given (never an estimate). */
  readonly entry: string;
}

/** The script's ARGVs for the content expiry, {@link ExpiresArgs}. */
export function expiresArgs(extra: AppendExtra | undefined, now: number): ExpiresArgs {
  const given = extra?.expiresAt;
  return given === undefined ? { keep: String(now + LONGEST_CONTENT_MS), entry: '' } : { keep: String(given), entry: String(given) };
}

/**
 * The append script's reply (`[seq, epoch, duplicate, ...nodes]`, append-13.lua's
 * "Returns") as an {@link AppendResult}.
 * @throws PixiuError INTERNAL when the reply has another shape (a script of another version)
 */
export function toAppendResult(reply: unknown): AppendResult {
  if (!Array.isArray(reply) || typeof reply[0] !== 'number' || typeof reply[1] !== 'string') {
    throw new PixiuError('INTERNAL', 'unexpected reply from the inbox append script');
  }
  return { seq: reply[0], epoch: reply[1], duplicate: reply[2] === 1, nodes: reply.slice(3) as string[] };
}

/**
 * Checks that a seq argument is a non-negative safe integer before it reaches a script.
 * @param name the argument's name, for the error
 * @throws PixiuError INVALID_REQUEST "<name> must be a non-negative integer"
 */
export function checkSeq(name: string, seq: number): void {
  if (!Number.isSafeInteger(seq) || seq < 0) throw invalid(`${name} must be a non-negative integer`);
}

/**
 * The acks hash as device → seq. Built with `Object.fromEntries` (which defines each
 * key as its own property): `__proto__` is a valid device name, and assigning it on a
 * plain object would set the prototype instead of adding the entry.
 */
export function parseCursors(raw: Record<string, string>): Record<string, number> {
  return Object.fromEntries(Object.entries(raw).map(([device, seq]) => [device, Number(seq)]));
}

/**
 * The meta hash's field holding `device`'s ack cursor of an epoch a rotation replaced
 * (`rotate-7.lua` step 3, `append-13.lua` step 5), "<seq> <epoch>": `cursor <device>`.
 * A device id has no space (DESIGN.md §2), so it names no other field of the meta hash.
 */
export function keptCursorField(device: string): string {
  return `cursor ${device}`;
}

/** A kept cursor's value as the rotation scripts write it: "<seq> <epoch>". */
const KEPT_CURSOR = /^(\d{1,16}) (\S+)$/;

/**
 * Reads a cursor a rotation kept ({@link keptCursorField}).
 * @returns its seq and the epoch it counts in; undefined for a value the scripts do not
 *   write (set by hand), taken as no cursor
 */
export function parseKeptCursor(value: string): { seq: number; epoch: string } | undefined {
  const m = KEPT_CURSOR.exec(value);
  const seq = m === null ? Number.NaN : Number(m[1]);
  if (m === null || !Number.isSafeInteger(seq)) return undefined;
  return { seq, epoch: m[2] as string };
}

/**
 * Every cursor a rotation kept in a user's meta hash ({@link keptCursorField}), as
 * device → seq and epoch; built with `Object.fromEntries`, as {@link parseCursors} is.
 * A field whose value the scripts do not write (set by hand) is left out.
 * @param meta the meta hash as HGETALL gives it
 */
export function parseKeptCursors(meta: Record<string, string>): Record<string, { seq: number; epoch: string }> {
  const prefix = keptCursorField('');
  return Object.fromEntries(Object.entries(meta).flatMap(([field, value]) => {
    const kept = field.startsWith(prefix) ? parseKeptCursor(value) : undefined;
    return kept === undefined ? [] : [[field.slice(prefix.length), kept]];
  }));
}

/** A stream entry ID as Redis gives it: `<ms>-<seq>`, each part decimal. */
const STREAM_ID = /^(\d+)-(\d+)$/;

/**
 * Reads one raw stream entry of an inbox page.
 * @returns the entry; a {@link MalformedEntry} for one that is not what the append
 *   script writes; undefined when even its seq cannot be read (the first part of its
 *   stream ID above 2^53 − 1, beyond any seq the server assigns and the protocol's
 *   JSON numbers): the caller skips it (`Inbox.range` logs it)
 */
export function toEntry([entryId, fields]: RawStreamEntry): PageEntry | undefined {
  const parts = STREAM_ID.exec(entryId);
  const seq = parts === null ? Number.NaN : Number(parts[1]);
  if (!Number.isSafeInteger(seq)) return undefined;
  let id = '';
  let kind = 0;
  let room: string | undefined;
  let exp: number | undefined;
  // Fields it does not know are skipped, as every release's reader skips them: a newer
  // release's field is no reason to take the entry for malformed.
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const value = fields[i + 1] ?? '';
    switch (fields[i]) {
      case 'id': id = value; break;
      case 'kind': kind = Number(value); break;
      case 'room': room = value; break;
      case 'exp': exp = entryExp(value); break;
    }
  }
  // Only the append script (append-13.lua and the versions before it) writes entries as
  // `<seq>-0` with a MsgID and a kind; anything else was written by an operator, a tool
  // or another release.
  if (!MSG_ID_RULE.test(id) || !isMsgKind(kind) || parts?.[2] !== '0' || seq < 1) return { seq, id: '', malformed: true };
  const entry: { seq: number; id: string; kind: MsgKind; room?: string; exp?: number } = { seq, id, kind };
  if (room !== undefined) entry.room = room;
  if (exp !== undefined) entry.exp = exp;
  return entry;
}

/** An `exp` as append-13.lua writes it: decimal digits, at most 15. */
const EXP_RULE = /^\d{1,15}$/;

/**
 * An entry's `exp` field (InboxEntry `exp`); undefined for a value the append script
 * does not write (set by hand: not decimal digits, or more than 15 of them). Such an
 * entry is not malformed: it names its message, and only the shortcut is lost (its
 * record is read, and the store says whether it expired: docs/decisions.md "An inbox
 * entry records its message's expiry").
 */
function entryExp(value: string): number | undefined {
  return EXP_RULE.test(value) ? Number(value) : undefined;
}

/**
 * One page of an inbox and its bounds, read as one snapshot.
 *
 * Edge values: no inbox at all → `epoch` null, `firstSeq` 1, `latestSeq` 0, no entries.
 * When nothing is retained, `firstSeq` is `latestSeq + 1`. An `afterSeq` at or beyond
 * `latestSeq` gives no entries (the bounds are still reported). `epoch` is also null
 * when Redis lost the meta hash but kept the stream; the next append creates a new one.
 */
export interface InboxPage {
  /** The inbox epoch, or null when the inbox has none. */
  readonly epoch: string | null;
  /** Seq of the oldest retained entry; `latestSeq + 1` when none is retained. */
  readonly firstSeq: number;
  /** Highest seq ever assigned (0: none). */
  readonly latestSeq: number;
  /**
   * Entries with seq > afterSeq, oldest first, at most `limit`; a malformed one in its
   * place ({@link MalformedEntry}: a gap of its seq, or none at seq 0 or at the seq of
   * an entry before it).
   */
  readonly entries: PageEntry[];
  /**
   * The stream's newest entry whatever `afterSeq` was (page-entries.ts `newest`), for the
   * delivery's epoch guard (DESIGN.md §11). Absent: the stream is empty, or it is malformed.
   */
  readonly newest?: InboxEntry;
}
