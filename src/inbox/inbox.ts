/**
 * The per-user inbox ("Pi", DESIGN.md §4): an ordered list of seq → MsgID in a Redis
 * stream, with an epoch naming the inbox and one ack cursor per device.
 *
 * Every operation is one Lua script on the keys of a single user (one Redis Cluster
 * slot), so it is atomic and Cluster-safe. Many recipients cost one round trip: issue
 * their appends in one tick and they go out as one pipeline (tick-pipeline.ts; the
 * other calls ride ioredis auto-pipelining, on in `createRedis`). Arguments and
 * replies are checked and read in codec.ts.
 */
import type { Redis } from 'ioredis';
import { invalid } from '../errors.js';
import type { MsgKind } from '../ids/msg-id.js';
import { redisCall, transaction } from '../redis/client.js';
import { Keys, type UserKeys } from '../redis/keys.js';
import { evalScript, loadScripts } from '../redis/scripts.js';
import {
  DEVICE_RULE, KIND_ARG, LONGEST_CONTENT_MS, checkAppend, checkSeq, expiresArgs, keptCursorField, newEpoch, parseCursors, parseKeptCursor,
  type AppendExtra, type AppendResult, type InboxEntry, type InboxPage, type MalformedEntry, type PageEntry,
} from './codec.js';
import {
  INBOX_SCRIPTS, type AppendArgv, type RangeReply,
} from './scripts.js';
import { AppendChain } from './append-chain.js';
import { appendArgv, appendPipeline, type AppendSettings } from './append-pipeline.js';
import { TickPipeline, type Flow } from './tick-pipeline.js';
import { PageEntries } from './page-entries.js';
import { inboxKeys, isWrongTypeReply, userKeysCall, wrongTypeFailure } from '../redis/wrong-type.js';
import { readLineage, type EpochLineage } from './lineage.js';
import type { Logger } from '../logger.js';
import { SETTINGS } from '../config/settings.js';

export type { Flow } from './tick-pipeline.js';
export type { AppendExtra, AppendResult, InboxEntry, InboxPage, MalformedEntry, PageEntry } from './codec.js';

/** Most entries one {@link Inbox.range} call may return. */
export const MAX_RANGE_LIMIT = 10_000;

/** Largest accepted cap: the `inboxCap` setting's bound (DESIGN.md §10). */
export const MAX_INBOX_CAP = 10_000_000;
/** Highest `deviceCursors` an inbox takes: the `maxDeviceCursors` setting's bound. */
export const MAX_DEVICE_CURSORS = SETTINGS.maxDeviceCursors.max;

/**
 * How long a user's inbox keys outlive the last content they point to, unless
 * configured ({@link InboxOptions.retentionGraceMs}): long enough that a device coming
 * back within a day of its last message's expiry is told `gap`, not `reset`, and short
 * enough that a user who never comes back costs Redis nothing after that.
 * docs/decisions.md, "Inbox retention".
 */
export const INBOX_RETENTION_GRACE_MS = 86_400_000;

/** Options of {@link Inbox}. */
export interface InboxOptions {
  /** Key prefix (setting `redisPrefix`, default `px:`). */
  readonly prefix: string;
  /** Entries kept per user, 1..10,000,000 (setting `inboxCap`, default 10,000). */
  readonly cap: number;
  /**
   * Most devices with an ack cursor per user (setting `maxDeviceCursors`, default
   * {@link DEFAULT_DEVICE_CURSORS}): past it, the cursors furthest behind are dropped
   * (`ack-7.lua`).
   */
  readonly deviceCursors?: number;
  /**
   * How long, in ms, a user's inbox keys outlive the expiry of the last content
   * appended (`append-13.lua` step 6); default {@link INBOX_RETENTION_GRACE_MS}, 0 to
   * 30 days.
   */
  readonly retentionGraceMs?: number;
  /**
   * Now, ms since the Unix epoch, as the append script judges presence entries live by
   * (and stamps a new inbox's `created`): the clock presence entries are written on
   * (NodeRegistry.now, Redis's). Default Date.now.
   */
  readonly now?: () => number;
  /**
   * Where a read logs an entry that is not what the append script writes, once per
   * entry (page-entries.ts); default: not logged.
   */
  readonly logger?: Logger;
  /**
   * The inbox generation this node last read (generation.ts `InboxGeneration.current`),
   * read at each append: an inbox that recorded a lower one gets a new epoch first
   * (`append-13.lua` step 1). Default: always 0 (never a rotation for it).
   */
  readonly generation?: () => number;
}

/** Devices with an ack cursor kept per user unless configured: the `maxDeviceCursors` setting's default. */
export const DEFAULT_DEVICE_CURSORS = SETTINGS.maxDeviceCursors.default;

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
  /** Cap, grace and most device cursors as scripts' ARGV, formatted once; clock, generation (append-pipeline.ts). */
  readonly #settings: AppendSettings;
  /** Appends issued in one tick go out as one pipeline (see tick-pipeline.ts). */
  readonly #appends: TickPipeline<AppendArgv, AppendResult>;
  /** Reads the entries of a page, and logs the malformed ones once each. */
  readonly #entries: PageEntries;

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
    this.#entries = new PageEntries(opts.logger);
    this.#keys = new Keys(opts.prefix);
    const devices = opts.deviceCursors ?? DEFAULT_DEVICE_CURSORS;
    if (!Number.isSafeInteger(devices) || devices < 1 || devices > MAX_DEVICE_CURSORS) {
      throw invalid(`the most device cursors must be an integer from 1 to ${MAX_DEVICE_CURSORS}`);
    }
    const grace = opts.retentionGraceMs ?? INBOX_RETENTION_GRACE_MS;
    if (!Number.isSafeInteger(grace) || grace < 0 || grace > LONGEST_CONTENT_MS) {
      throw invalid('the inbox retention grace must be an integer from 0 to 30 days, in ms');
    }
    this.#settings = {
      cap: String(opts.cap), grace: String(grace), now: opts.now ?? (() => Date.now()), generation: opts.generation ?? (() => 0),
      deviceCursors: String(devices),
    };
    loadScripts(redis, Object.values(INBOX_SCRIPTS));
    this.#appends = appendPipeline(redis);
  }

  /** The key builder this inbox uses (the same prefix). */
  get keys(): Keys {
    return this.#keys;
  }

  /**
   * Appends a MsgID to a user's inbox, exactly once (DESIGN.md §4, `append-13.lua`).
   * Creates the inbox (and its epoch) when it has none, and gives it a new epoch first
   * when the inbox generation ({@link InboxOptions.generation}) is above the one its
   * epoch was made under (Redis went back in time: generation.ts). The seq is one more than the
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
   *   sent in the order made, flows take turns; default: one flow shared by all callers.
   *   In one from {@link orderedFlow}, they also land in that order per user, or not at all
   * @throws PixiuError INVALID_REQUEST for a bad argument; UNAVAILABLE when Redis fails
   *   (also when, in an ordered flow, an earlier append to the user is not in the inbox)
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
    return this.#appends.call(appendArgv(keys, msgId, KIND_ARG[kind], extra?.room ?? '', expiresArgs(extra, now), this.#settings), flow);
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
    const expires = expiresArgs(extra, Date.now());
    return this.#appends.callEach(uids.length, (i) => appendArgv(this.#keys.user(uids[i] as string), msgId, kindArg, room, expires, this.#settings), flow);
  }

  /**
   * A new flow (see {@link append}) for a batch: its appends to one user land in the
   * order made, or an append whose earlier one is not in the inbox (Redis refused it) is
   * refused too, 503, nothing written (append-chain.ts, `append-13.lua` step 2a).
   */
  orderedFlow(): Flow {
    return new AppendChain();
  }

  /**
   * What an append to `uid` that failed with `err` ({@link append}, {@link appendEach})
   * is answered with: `err`, or, when a key of the user's had the wrong type
   * (WRONGTYPE), an INTERNAL naming the user, whose cause names the key
   * (wrong-type.ts; it reads the keys' types).
   */
  appendFailure(uid: string, err: unknown): Promise<unknown> {
    return isWrongTypeReply(err) ? wrongTypeFailure(this.#redis, inboxKeys(uid, this.#keys.user(uid)), err.cause, 'append') : Promise.resolve(err);
  }

  /**
   * Fails every append made in `flow` from now on with `err` (the caller's request failed
   * part-way: tick-pipeline.ts `breakFlow`); those made before go on.
   */
  breakFlow(flow: Flow, err: unknown): void {
    this.#appends.breakFlow(flow, err);
  }

  /**
   * Reads up to `limit` entries after `afterSeq`, with the inbox's epoch and bounds, in
   * one snapshot (DESIGN.md §4 "Reads", `range-3.lua`), and the stream's newest entry
   * ({@link InboxPage.newest}). See {@link InboxPage} for the edge values.
   *
   * An entry that is not what the append script writes (an operator's `XADD`) comes as
   * a {@link MalformedEntry} in its place, whose seq readers give as an `undeliverable`
   * gap; one whose seq cannot be read (above 2^53 − 1) is left out. Each is logged at
   * warn the first time it is read (docs/decisions.md "Malformed inbox entries").
   *
   * @param afterSeq return entries with a greater seq; 0 for the oldest retained
   * @param limit most entries, 1..10,000
   * @throws PixiuError INVALID_REQUEST for a bad argument; UNAVAILABLE when Redis fails; INTERNAL for a key of the user's of the wrong type (wrong-type.ts)
   */
  async range(uid: string, afterSeq: number, limit: number): Promise<InboxPage> {
    const keys = this.#keys.user(uid);
    checkSeq('after seq', afterSeq);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RANGE_LIMIT) {
      throw invalid(`limit must be an integer from 1 to ${MAX_RANGE_LIMIT}`);
    }
    const [epoch, firstSeq, latestSeq, raw, last] = await userKeysCall(this.#redis, uid, keys, () =>
      evalScript<RangeReply>(this.#redis, INBOX_SCRIPTS.range, [keys.inbox, keys.meta], [String(afterSeq), String(limit)]),
    );
    const page: InboxPage = { epoch: epoch === '' ? null : epoch, firstSeq, latestSeq, entries: this.#entries.read(uid, raw) };
    const newest = PageEntries.newest(last);
    return newest === undefined ? page : { ...page, newest };
  }

  /**
   * Records that `device` has acknowledged every seq up to `seq` (DESIGN.md §5,
   * `ack-7.lua`). A cursor never moves back: acking below it changes nothing. With
   * `epoch`, an ack made under another inbox epoch (the inbox was recreated or rotated
   * since) stores no cursor of the current one, nor does an ack to a user with no inbox
   * (none yet, or it expired: its next append drops every cursor anyway); it moves
   * forward the device's cursor kept from that epoch by a rotation, if there is one
   * ({@link rotateEpoch}), and when there is none and the current epoch's lineage shows
   * it replaced `epoch` (the ack was on its way as the rotation came), makes it, unless
   * the device has a cursor of the current epoch, `seq` is 0, or the user holds the most
   * device cursors' worth of kept ones (docs/decisions.md "Stored cursors across a new
   * epoch"). The device's first cursor of the current epoch deletes such a kept one. A device's first cursor that takes the user past the most device cursors
   * drops those of the devices furthest behind. The cursors expire with the inbox.
   *
   * @param device a device id (DESIGN.md §2), 1–64 chars of `[A-Za-z0-9._:-]`
   * @param seq the highest acked seq, a non-negative integer
   * @param epoch the epoch `seq` belongs to; omitted: any
   * @returns the device's cursor after the call; null when `epoch` is not the inbox's now (rotated, recreated, gone)
   * @throws PixiuError INVALID_REQUEST for a bad argument; UNAVAILABLE when Redis fails; INTERNAL for a key of the user's of the wrong type (wrong-type.ts)
   */
  async ack(uid: string, device: string, seq: number, epoch?: string): Promise<number | null> {
    const keys = this.#keys.user(uid);
    if (!DEVICE_RULE.test(device)) throw invalid('device must be 1-64 characters of A-Z a-z 0-9 . _ : -');
    checkSeq('seq', seq);
    return userKeysCall(this.#redis, uid, keys, () => evalScript<number>(this.#redis, INBOX_SCRIPTS.ack, [keys.acks, keys.meta], [device, String(seq), epoch ?? '', this.#settings.deviceCursors]))
      .then((cursor) => (cursor < 0 ? null : cursor)); // -1: the epoch given is not the inbox's (ack-7.lua step 1)
  }

  /**
   * Gives the user's inbox a new epoch if it is still `epoch` (DESIGN.md §11,
   * `rotate-7.lua`): moves the stored ack cursors, which count seqs of the old one, out
   * of the acks hash into the meta hash with that epoch (`cursor <device>`; those kept
   * from older epochs stay, at most the most device cursors of them), so a device
   * resuming from one is reset ({@link deviceCursor}; docs/decisions.md "Stored cursors
   * across a new epoch"), records the generation this node holds ({@link InboxOptions.generation}), so the
   * next append does not rotate it again, and the new epoch's lineage ({@link lineage}).
   * For an inbox Redis gave back with less than a connection was sent: its lost seqs
   * will name other messages, so every device with a cursor of `epoch` must be told
   * `reset`. One node does it when several see it (compared and set in one script).
   * @param epoch the epoch the delivery read the shrunken inbox under
   * @param coolDownMs for a rotation only a connecting device's `last_seq` asks for
   *   (a client's mistake looks the same): refused when another such rotation of the
   *   user was made less than this long ago, on any node (Redis's clock); 0 (default)
   *   for one the node's own deliveries prove, never refused
   * @param readLatest for a resume claim's rotation, the latest seq of the read that
   *   showed the claim: the lineage goes on from at most it (a seq appended between that
   *   read and this call is no device's: marked as news after the `reset`); undefined:
   *   from the counter (a rotation the node proved records 0 anyway)
   * @returns the inbox's epoch after the call (a new one, or whatever another node set);
   *   `epoch` itself when the cool-down refused it; null when the inbox has none
   * @throws PixiuError INVALID_REQUEST for a bad uid, an empty epoch, a cool-down that is not
   *   a whole number of ms >= 0 or a `readLatest` that is not a seq >= 0; UNAVAILABLE when Redis fails; INTERNAL for a key of the wrong type (wrong-type.ts)
   */
  async rotateEpoch(uid: string, epoch: string, coolDownMs = 0, readLatest?: number): Promise<string | null> {
    const keys = this.#keys.user(uid);
    if (epoch === '') throw invalid('epoch must be a non-empty string');
    if (!Number.isSafeInteger(coolDownMs) || coolDownMs < 0) throw invalid('the cool-down must be a whole number of ms >= 0');
    if (readLatest !== undefined && (!Number.isSafeInteger(readLatest) || readLatest < 0)) throw invalid('the latest seq read must be a whole number >= 0');
    let fresh = newEpoch();
    while (fresh === epoch) fresh = newEpoch();
    const after = await userKeysCall(this.#redis, uid, keys, () => evalScript<string>(this.#redis, INBOX_SCRIPTS.rotate, [keys.meta, keys.acks], [
      epoch, fresh, String(coolDownMs), String(this.#settings.generation()), readLatest === undefined ? '' : String(readLatest), this.#settings.deviceCursors,
    ]));
    return after === '' ? null : after;
  }

  /**
   * The epoch the user's inbox epoch replaced and through which seq it goes on from it (lineage.ts).
   * @returns undefined when unknown: no inbox, or an epoch created afresh (its seqs restart)
   * @throws PixiuError INVALID_REQUEST for a bad uid; UNAVAILABLE when Redis fails; INTERNAL for a key of the wrong type (wrong-type.ts)
   */
  async lineage(uid: string): Promise<EpochLineage | undefined> {
    return readLineage(this.#redis, uid, this.#keys.user(uid));
  }

  /**
   * When the user's inbox keys expire (retention, `append-13.lua` step 6), ms since the
   * Unix epoch; null when they do not (no inbox, or one no append since append-7 has touched yet).
   * @throws PixiuError INVALID_REQUEST for a bad uid; UNAVAILABLE when Redis fails
   */
  async expiresAt(uid: string): Promise<number | null> {
    const meta = this.#keys.meta(uid);
    const at = await redisCall(() => this.#redis.pexpiretime(meta));
    return at >= 0 ? at : null;
  }

  /**
   * The ack cursor of every device of a user that has acked anything in the inbox's
   * current epoch (not those a rotation kept of an older one: {@link deviceCursor}).
   *
   * @returns device → highest acked seq; `{}` when none
   * @throws PixiuError INVALID_REQUEST for a bad uid; UNAVAILABLE when Redis fails; INTERNAL for a key of the user's of the wrong type (wrong-type.ts)
   */
  async cursors(uid: string): Promise<Record<string, number>> {
    const keys = this.#keys.user(uid);
    return parseCursors(await userKeysCall(this.#redis, uid, keys, () => this.#redis.hgetall(keys.acks)));
  }

  /**
   * A device's ack cursor with the inbox epoch it counts in, read as one snapshot
   * (MULTI): a device connecting without `last_seq` resumes after it, and with the
   * epoch named, an inbox recreated before its first read resets it (DESIGN.md §5
   * "Resume rules") instead of taking the old cursor for a seq of the new inbox. With
   * no cursor of the current epoch, the one a rotation kept of an older epoch
   * ({@link rotateEpoch}, `append-13.lua` step 5), with that epoch: the device is reset as
   * one giving that `last_seq` and `epoch` is (docs/protocol.md "Where delivery starts").
   *
   * @returns undefined when the device has no cursor (never acked, dropped past the most
   *   device cursors, or lost with the inbox); `epoch` undefined when the inbox has none
   *   (its meta hash is gone)
   * @throws PixiuError INVALID_REQUEST for a bad uid or device; UNAVAILABLE when Redis fails;
   *   INTERNAL for a key of the user's of the wrong type (src/redis/wrong-type.ts)
   */
  async deviceCursor(uid: string, device: string): Promise<{ seq: number; epoch: string | undefined } | undefined> {
    const keys = this.#keys.user(uid);
    if (!DEVICE_RULE.test(device)) throw invalid('device must be 1-64 characters of A-Z a-z 0-9 . _ : -');
    const [seq, meta] = await userKeysCall(this.#redis, uid, keys, () => transaction(() => this.#redis.multi().hget(keys.acks, device).hmget(keys.meta, 'epoch', keptCursorField(device)).exec()));
    const [e, kept] = Array.isArray(meta) ? meta as unknown[] : [];
    if (typeof seq === 'string') return { seq: Number(seq), epoch: typeof e === 'string' && e !== '' ? e : undefined };
    return typeof kept === 'string' ? parseKeptCursor(kept) : undefined;
  }

  /**
   * Where a MsgID sits in a user's inbox, and the user's ack cursors (for
   * `GET /v1/messages/{id}`: which devices acked it). Two calls on one user's keys in
   * one round trip (`locate-2.lua`, HGETALL); not a snapshot, which is fine for a report.
   *
   * @returns `seq` null when the MsgID is not in the inbox's stream: never appended,
   *   trimmed, or its entry deleted by hand (XDEL), which history and delivery show as
   *   a gap; `cursors` as {@link cursors}
   * @throws PixiuError INVALID_REQUEST for a bad uid or MsgID; UNAVAILABLE when Redis fails; INTERNAL for a key of the user's of the wrong type (wrong-type.ts)
   */
  async locate(uid: string, msgId: string): Promise<{ seq: number | null; cursors: Record<string, number> }> {
    const keys = this.#keys.user(uid);
    const [seq, raw] = await userKeysCall(this.#redis, uid, keys, () => Promise.all([
      evalScript<number>(this.#redis, INBOX_SCRIPTS.locate, [keys.ids, keys.inbox], [msgId]),
      this.#redis.hgetall(keys.acks),
    ]));
    return { seq: seq === 0 ? null : seq, cursors: parseCursors(raw) };
  }
}
