/**
 * The per-user inbox ("Pi", DESIGN.md §4): an ordered list of seq → MsgID in a Redis
 * stream, with an epoch naming the inbox and one ack cursor per device.
 *
 * Every operation is one Lua script on the keys of a single user (one Redis Cluster
 * slot), so it is atomic and Cluster-safe. Many recipients cost one round trip: issue
 * their appends in one tick and they go out as one pipeline (tick-pipeline.ts; the
 * other calls ride ioredis auto-pipelining, on in `createRedis`).
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { PixiuError, invalid } from '../errors.js';
import type { MsgKind } from '../ids/msg-id.js';
import { redisCall, toRedisError } from '../redis/client.js';
import { Keys, type UserKeys } from '../redis/keys.js';
import { isNoScript, sendEvalsha } from '../redis/scripts.js';
import {
  APPEND_KEYS, APPEND_SHA, INBOX_SCRIPTS, appendArgsOf, defineInboxScripts, type AppendArgv, type RawStreamEntry,
} from './scripts.js';
import { TickPipeline, type Flow } from './tick-pipeline.js';
import { SETTINGS } from '../config/settings.js';

export type { Flow } from './tick-pipeline.js';

/** Most entries one {@link Inbox.range} call may return. */
export const MAX_RANGE_LIMIT = 10_000;

/** Largest accepted cap: the `inboxCap` setting's bound (DESIGN.md §10). */
export const MAX_INBOX_CAP = 10_000_000;
/** Highest `deviceCursors` an inbox takes: the `maxDeviceCursors` setting's bound. */
export const MAX_DEVICE_CURSORS = SETTINGS.maxDeviceCursors.max;

/** A device id (DESIGN.md §2): 1–64 chars of `[A-Za-z0-9._:-]`. */
const DEVICE_RULE = /^[A-Za-z0-9._:-]{1,64}$/;
/** A MsgID as written (DESIGN.md §2): 16 lower-case hex digits. */
const MSG_ID_RULE = /^[0-9a-f]{16}$/;
/** Longest room id stored with an entry, in UTF-16 code units. */
const MAX_ROOM_LENGTH = 256;

/**
 * Most appends in one pipeline: a bounded batch lets Redis start on it while Node still
 * builds the next. Batches of 250 to 1,000 all kept Redis ~90 % busy in bench/inbox.ts.
 */
const MAX_APPEND_BATCH = 500;

/**
 * How long a user's inbox keys outlive the last content they point to, unless
 * configured ({@link InboxOptions.retentionGraceMs}): long enough that a device coming
 * back within a day of its last message's expiry is told `gap`, not `reset`, and short
 * enough that a user who never comes back costs Redis nothing after that.
 * docs/decisions.md, "Inbox retention".
 */
export const INBOX_RETENTION_GRACE_MS = 86_400_000;

/**
 * The content expiry assumed for an append given none: the longest a message may be
 * kept (the `messageTtl` setting's bound, 30 days) from now, so keys never go before
 * content they point to.
 */
const LONGEST_CONTENT_MS = SETTINGS.messageTtlMs.max;

/** A kind as the script's ARGV, by kind number. */
const KIND_ARG: Record<MsgKind, string> = { 1: '1', 2: '2', 3: '3', 4: '4' };

/** Options of {@link Inbox}. */
export interface InboxOptions {
  /** Key prefix (setting `redisPrefix`, default `px:`). */
  readonly prefix: string;
  /** Entries kept per user, 1..10,000,000 (setting `inboxCap`, default 10,000). */
  readonly cap: number;
  /**
   * Most devices with an ack cursor per user (setting `maxDeviceCursors`, default
   * {@link DEFAULT_DEVICE_CURSORS}): past it, the cursors furthest behind are dropped
   * (`ack-4.lua`).
   */
  readonly deviceCursors?: number;
  /**
   * How long, in ms, a user's inbox keys outlive the expiry of the last content
   * appended (`append-7.lua` step 6); default {@link INBOX_RETENTION_GRACE_MS}, 0 to
   * 30 days.
   */
  readonly retentionGraceMs?: number;
}

/** Devices with an ack cursor kept per user unless configured: the `maxDeviceCursors` setting's default. */
export const DEFAULT_DEVICE_CURSORS = SETTINGS.maxDeviceCursors.default;

/** Outcome of {@link Inbox.append}. */
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
  /** The message kind, as given to {@link Inbox.append}. */
  readonly kind: MsgKind;
  /** The room the message was sent to, for room messages. */
  readonly room?: string;
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
  /** Entries with seq > afterSeq, oldest first, at most `limit`. */
  readonly entries: InboxEntry[];
}

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
function newEpoch(): string {
  if (epochOffset + EPOCH_BYTES > epochPool.length) {
    epochPool = randomBytes(EPOCH_BYTES * EPOCH_POOL);
    epochOffset = 0;
  }
  const epoch = epochPool.toString('base64url', epochOffset, epochOffset + EPOCH_BYTES);
  epochOffset += EPOCH_BYTES;
  return epoch;
}

function isKind(n: number): n is MsgKind {
  return n === 1 || n === 2 || n === 3 || n === 4;
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
function checkAppend(msgId: string, kind: MsgKind, extra: AppendExtra | undefined): void {
  if (!MSG_ID_RULE.test(msgId)) throw invalid('msg id must be 16 lower-case hex digits');
  if (!isKind(kind)) throw invalid('kind must be 1, 2, 3 or 4');
  const room = extra?.room;
  if (room !== undefined && (typeof room !== 'string' || room.length === 0 || room.length > MAX_ROOM_LENGTH)) {
    throw invalid(`room must be 1-${MAX_ROOM_LENGTH} characters`);
  }
  const expiresAt = extra?.expiresAt;
  if (expiresAt !== undefined && (!Number.isSafeInteger(expiresAt) || expiresAt < 0)) {
    throw invalid('expires at must be a non-negative integer (ms since the Unix epoch)');
  }
}

/** The script's ARGV for the content expiry: the given one, else the longest from now. */
function expiresArg(extra: AppendExtra | undefined, now: number): string {
  return String(extra?.expiresAt ?? now + LONGEST_CONTENT_MS);
}

function toAppendResult(reply: unknown): AppendResult {
  if (!Array.isArray(reply) || typeof reply[0] !== 'number' || typeof reply[1] !== 'string') {
    throw new PixiuError('INTERNAL', 'unexpected reply from the inbox append script');
  }
  return { seq: reply[0], epoch: reply[1], duplicate: reply[2] === 1, nodes: reply.slice(3) as string[] };
}

function checkSeq(name: string, seq: number): void {
  if (!Number.isSafeInteger(seq) || seq < 0) throw invalid(`${name} must be a non-negative integer`);
}

/**
 * The acks hash as device → seq. Built with `Object.fromEntries` (which defines each
 * key as its own property): `__proto__` is a valid device name, and assigning it on a
 * plain object would set the prototype instead of adding the entry.
 */
function parseCursors(raw: Record<string, string>): Record<string, number> {
  return Object.fromEntries(Object.entries(raw).map(([device, seq]) => [device, Number(seq)]));
}

/** Seq of a stream entry id `<seq>-0`. */
function seqOf(entryId: string): number {
  return Number.parseInt(entryId, 10);
}

function toEntry([entryId, fields]: RawStreamEntry): InboxEntry {
  let id = '';
  let kind = 0;
  let room: string | undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const value = fields[i + 1] ?? '';
    switch (fields[i]) {
      case 'id': id = value; break;
      case 'kind': kind = Number(value); break;
      case 'room': room = value; break;
    }
  }
  const seq = seqOf(entryId);
  if (!MSG_ID_RULE.test(id) || !isKind(kind)) {
    // Only the append script (append-7.lua and the versions before it) writes entries;
    // anything else is a fault of ours or of an operator.
    throw new PixiuError('INTERNAL', `inbox entry ${entryId} is malformed`);
  }
  return room === undefined ? { seq, id, kind } : { seq, id, kind, room };
}

/**
 * A user's inbox in Redis (DESIGN.md §4).
 *
 * Errors: malformed arguments are programming errors and reject with PixiuError
 * INVALID_REQUEST before anything is sent; every Redis failure (down, timed out, OOM)
 * rejects with PixiuError UNAVAILABLE (src/redis/client.ts). Every operation is safe to
 * retry.
 */
export class Inbox {
  readonly #redis: Redis;
  readonly #keys: Keys;
  /** The cap as the script's ARGV, formatted once. */
  readonly #cap: string;
  readonly #deviceCursors: string;
  /** The retention grace as the script's ARGV. */
  readonly #grace: string;
  /** Appends issued in one tick go out as one pipeline (see tick-pipeline.ts). */
  readonly #appends: TickPipeline<AppendArgv, AppendResult>;

  /**
   * @param redis a client from `createRedis` (auto-pipelining on, offline queue off)
   * @param opts key prefix and per-user cap
   * @throws PixiuError INVALID_REQUEST for a bad prefix or cap
   */
  constructor(redis: Redis, opts: InboxOptions) {
    if (!Number.isSafeInteger(opts.cap) || opts.cap < 1 || opts.cap > MAX_INBOX_CAP) {
      throw invalid(`inbox cap must be an integer from 1 to ${MAX_INBOX_CAP}`);
    }
    this.#redis = redis;
    this.#keys = new Keys(opts.prefix);
    this.#cap = String(opts.cap);
    const devices = opts.deviceCursors ?? DEFAULT_DEVICE_CURSORS;
    if (!Number.isSafeInteger(devices) || devices < 1 || devices > MAX_DEVICE_CURSORS) {
      throw invalid(`the most device cursors must be an integer from 1 to ${MAX_DEVICE_CURSORS}`);
    }
    this.#deviceCursors = String(devices);
    const grace = opts.retentionGraceMs ?? INBOX_RETENTION_GRACE_MS;
    if (!Number.isSafeInteger(grace) || grace < 0 || grace > LONGEST_CONTENT_MS) {
      throw invalid('the inbox retention grace must be an integer from 0 to 30 days, in ms');
    }
    this.#grace = String(grace);
    defineInboxScripts(redis);
    this.#appends = new TickPipeline<AppendArgv, AppendResult>(redis, {
      command: INBOX_SCRIPTS.append.command,
      // EVALSHA as a plain command (scripts.ts `sendEvalsha`); when the script is not
      // loaded, the registered command sends it as EVAL, which loads it.
      send: sendEvalsha,
      resend: (client, argv, err) => (isNoScript(err) ? client.pxAppendV5(...appendArgsOf(argv)) : undefined),
      reply: toAppendResult,
      error: toRedisError,
    }, MAX_APPEND_BATCH);
  }

  /** The key builder this inbox uses (the same prefix). */
  get keys(): Keys {
    return this.#keys;
  }

  /**
   * Appends a MsgID to a user's inbox, exactly once (DESIGN.md §4, `append-7.lua`).
   * Creates the inbox (and its epoch) when it has none. The seq is one more than the
   * highest ever assigned, so seqs are contiguous and never reused. The stream is then
   * trimmed to exactly `cap` entries: the first retained seq is `seq - cap + 1`. The
   * user's inbox keys are kept until the retention grace after the latest content
   * expiry appended (docs/decisions.md, "Inbox retention").
   *
   * @param uid the recipient
   * @param msgId the MsgID, 16 lower-case hex digits
   * @param kind the message kind, stored so delivery needs no store read to know it
   * @param extra the room of a room message, and when the content expires
   * @param flow what it keeps order with (tick-pipeline.ts): appends of one flow are
   *   sent in the order made, flows take turns; default: one flow shared by all callers
   * @throws PixiuError INVALID_REQUEST for a bad argument; UNAVAILABLE when Redis fails
   */
  append(uid: string, msgId: string, kind: MsgKind, extra?: AppendExtra, flow?: Flow): Promise<AppendResult> {
    // Not async, and no redisCall closure: this runs once per recipient, and every
    // promise and closure saved here is garbage not made on the hottest path.
    let keys: UserKeys;
    try {
      keys = this.#keys.user(uid);
      checkAppend(msgId, kind, extra);
    } catch (err) {
      return Promise.reject(err);
    }
    const now = Date.now();
    return this.#appends.call([
      APPEND_SHA, APPEND_KEYS, keys.inbox, keys.meta, keys.ids, keys.conns, keys.acks,
      msgId, KIND_ARG[kind], this.#cap, newEpoch(), String(now), extra?.room ?? '', expiresArg(extra, now), this.#grace,
    ], flow);
  }

  /**
   * Appends one MsgID to the inbox of each of `uids`, as {@link append} does for each,
   * queued as one call: the appends go out in order, in the bounded writes of the
   * append pipeline, and are built only then, so queuing those of a message to 10,000
   * users holds the event loop no longer than queuing one (tick-pipeline.ts).
   *
   * @param uids the recipients, each once
   * @param flow as {@link append}'s
   * @returns one settled result per uid, in order: the append's result, or its
   *   PixiuError (INVALID_REQUEST for a bad uid, UNAVAILABLE when Redis fails)
   * @throws PixiuError INVALID_REQUEST (as a rejection, nothing queued) for a bad
   *   msgId, kind, room or content expiry: the only way it rejects
   */
  appendEach(uids: readonly string[], msgId: string, kind: MsgKind, extra?: AppendExtra, flow?: Flow): Promise<PromiseSettledResult<AppendResult>[]> {
    try {
      checkAppend(msgId, kind, extra);
    } catch (err) {
      return Promise.reject(err);
    }
    const kindArg = KIND_ARG[kind];
    const room = extra?.room ?? '';
    // Fixed when queued: an append sent later keeps the keys no shorter.
    const expires = expiresArg(extra, Date.now());
    return this.#appends.callEach(uids.length, (i) => {
      const keys = this.#keys.user(uids[i] as string);
      return [
        APPEND_SHA, APPEND_KEYS, keys.inbox, keys.meta, keys.ids, keys.conns, keys.acks,
        msgId, kindArg, this.#cap, newEpoch(), String(Date.now()), room, expires, this.#grace,
      ];
    }, flow);
  }

  /**
   * Reads up to `limit` entries after `afterSeq`, with the inbox's epoch and bounds, in
   * one snapshot (DESIGN.md §4 "Reads", `range-2.lua`). See {@link InboxPage} for the
   * edge values.
   *
   * @param afterSeq return entries with a greater seq; 0 for the oldest retained
   * @param limit most entries, 1..10,000
   * @throws PixiuError INVALID_REQUEST for a bad argument; UNAVAILABLE when Redis fails;
   *   INTERNAL when a stored entry is malformed
   */
  async range(uid: string, afterSeq: number, limit: number): Promise<InboxPage> {
    const keys = this.#keys.user(uid);
    checkSeq('after seq', afterSeq);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RANGE_LIMIT) {
      throw invalid(`limit must be an integer from 1 to ${MAX_RANGE_LIMIT}`);
    }
    const [epoch, firstSeq, latestSeq, raw] = await redisCall(() =>
      this.#redis.pxRangeV1(keys.inbox, keys.meta, String(afterSeq), String(limit)),
    );
    return { epoch: epoch === '' ? null : epoch, firstSeq, latestSeq, entries: raw.map(toEntry) };
  }

  /**
   * Records that `device` has acknowledged every seq up to `seq` (DESIGN.md §5,
   * `ack-4.lua`). A cursor never moves back: acking below it changes nothing. With
   * `epoch`, an ack made under another inbox epoch (the inbox was recreated since)
   * changes nothing either, nor does an ack to a user with no inbox (none yet, or it
   * expired: its next append drops every cursor anyway). A device's first cursor that
   * takes the user past the most device cursors drops those of the devices furthest
   * behind. The cursors expire with the inbox.
   *
   * @param device a device id (DESIGN.md §2), 1–64 chars of `[A-Za-z0-9._:-]`
   * @param seq the highest acked seq, a non-negative integer
   * @param epoch the epoch `seq` belongs to; omitted: any
   * @returns the device's cursor after the call
   * @throws PixiuError INVALID_REQUEST for a bad argument; UNAVAILABLE when Redis fails
   */
  async ack(uid: string, device: string, seq: number, epoch?: string): Promise<number> {
    const keys = this.#keys.user(uid);
    if (!DEVICE_RULE.test(device)) throw invalid('device must be 1-64 characters of A-Z a-z 0-9 . _ : -');
    checkSeq('seq', seq);
    return redisCall(() => this.#redis.pxAckV4(keys.acks, keys.meta, device, String(seq), epoch ?? '', this.#deviceCursors));
  }

  /**
   * Gives the user's inbox a new epoch if it is still `epoch`, and deletes the stored
   * ack cursors, which count seqs of the old one (DESIGN.md §11, `rotate-2.lua`). For
   * an inbox that Redis gave back with less than a connection was already sent: its
   * lost seqs will name other messages, so every device holding a cursor of `epoch`
   * must be told `reset`. Done by one node when several see it (the epoch is compared
   * and set in one script).
   *
   * @param epoch the epoch the delivery read the shrunken inbox under
   * @returns the inbox's epoch after the call (a new one, or whatever another node set);
   *   null when the inbox has none
   * @throws PixiuError INVALID_REQUEST for a bad uid or an empty epoch; UNAVAILABLE when Redis fails
   */
  async rotateEpoch(uid: string, epoch: string): Promise<string | null> {
    const keys = this.#keys.user(uid);
    if (epoch === '') throw invalid('epoch must be a non-empty string');
    let fresh = newEpoch();
    while (fresh === epoch) fresh = newEpoch();
    const after = await redisCall(() => this.#redis.pxRotateV1(keys.meta, keys.acks, epoch, fresh));
    return after === '' ? null : after;
  }

  /**
   * When the user's inbox keys expire (retention, `append-7.lua` step 6), ms since the
   * Unix epoch; null when they do not (no inbox, or one no append-7 has touched yet).
   * @throws PixiuError INVALID_REQUEST for a bad uid; UNAVAILABLE when Redis fails
   */
  async expiresAt(uid: string): Promise<number | null> {
    const meta = this.#keys.meta(uid);
    const at = await redisCall(() => this.#redis.pexpiretime(meta));
    return at >= 0 ? at : null;
  }

  /**
   * The ack cursor of every device of a user that has acked anything.
   *
   * @returns device → highest acked seq; `{}` when none
   * @throws PixiuError INVALID_REQUEST for a bad uid; UNAVAILABLE when Redis fails
   */
  async cursors(uid: string): Promise<Record<string, number>> {
    const acks = this.#keys.acks(uid);
    return parseCursors(await redisCall(() => this.#redis.hgetall(acks)));
  }

  /**
   * Where a MsgID sits in a user's inbox, and the user's ack cursors (for
   * `GET /v1/messages/{id}`: which devices acked it). Two reads of one user's keys in
   * one round trip; not a snapshot, which is fine for a report.
   *
   * @returns `seq` null when the MsgID is not in the retained window (never appended,
   *   or trimmed); `cursors` as {@link cursors}
   * @throws PixiuError INVALID_REQUEST for a bad uid; UNAVAILABLE when Redis fails
   */
  async locate(uid: string, msgId: string): Promise<{ seq: number | null; cursors: Record<string, number> }> {
    const keys = this.#keys.user(uid);
    const [score, raw] = await redisCall(() => Promise.all([this.#redis.zscore(keys.ids, msgId), this.#redis.hgetall(keys.acks)]));
    return { seq: score === null ? null : Number(score), cursors: parseCursors(raw) };
  }
}
