/**
 * The message record of the store ("Xiu", DESIGN.md §3): its types, the checks a new
 * message passes before anything is stored, and its encoding.
 *
 * Encoding is JSON, chosen over msgpack because JSON round-trips every string exactly:
 * `JSON.stringify` escapes each control character and each lone surrogate
 * (`"\ud800"`), so the UTF-8 bytes on disk hold any JavaScript string without loss
 * (DESIGN.md §3: "payload bytes round-trip exactly").
 *
 * A record's JSON is built by concatenating the `JSON.stringify` output of each field,
 * so `data` is serialised once per put, and written once, straight into the stored
 * bytes, which are measured against the size limit. The stored JSON leaves out `id`
 * (it is the record's key) and begins with `expiresAt` (see {@link expiresAtOf}).
 */
import { PixiuError, invalid } from '../errors.js';
import { CLOCK_SKEW_BOUND_MS } from '../redis/redis-clock.js';
import { isMsgKind, MsgKind } from '../ids/msg-id.js';
import { checkData } from './data-depth.js';
import { RecordArena } from './record-arena.js';

/** A message handed to {@link MessageStore.put}. */
export interface NewMessage {
  /** user, room, broadcast or channel (DESIGN.md §2). */
  kind: MsgKind;
  /** Application message type, 1–64 chars (DESIGN.md §3). */
  type: string;
  /** Sender user id, if any. */
  from?: string;
  /** Any JSON value; `undefined`, functions, symbols, BigInts and cycles are refused. */
  data: unknown;
  /** Recipient user ids (up to 1,000); not counted against the size limit. */
  to?: readonly string[];
  /** Room id, for room messages. */
  room?: string;
  /** Producer's idempotency key, 1–128 printable ASCII chars (DESIGN.md §2). */
  clientMsgId?: string;
  /** Retention in ms; default the store's `defaultTtlMs` (DESIGN.md §10: 7 days). */
  ttlMs?: number;
  /**
   * The message's time (`ts`), ms since the epoch, when the caller takes it from a
   * clock other than the store's: a room message's is Redis's, the clock of the
   * rooms' join slots (src/rooms/membership.ts), so that nodes whose clocks differ
   * agree on who had joined when it was sent. Default: the store's clock.
   */
  tsMs?: number;
}

/**
 * A message as stored and read back. Records read from the store are deep-frozen,
 * because one object is shared by the read cache and every reader.
 */
export interface StoredMessage {
  /** MsgID, 16 lower-case hex digits (DESIGN.md §2). */
  id: string;
  kind: MsgKind;
  type: string;
  from?: string;
  /** The JSON value as it went in (as `JSON.stringify` writes it). */
  data: unknown;
  to?: string[];
  room?: string;
  /** When the store accepted it, ms since the epoch. */
  ts: number;
  clientMsgId?: string;
  /** When it expires, ms since the epoch; it is never returned from then on. */
  expiresAt: number;
}

/** What a put answers. */
export interface PutResult {
  /** The MsgID: the new one, or the first one stored under the same `clientMsgId`. */
  id: string;
  /** True when `clientMsgId` was already stored: nothing new was written. */
  duplicate: boolean;
  /**
   * The record. For a new message `data` is the caller's own value (not a copy); for a
   * duplicate it is the first record, as stored.
   */
  message: StoredMessage;
  /** The record as stored (its JSON bytes): what {@link MessageStore.remember} caches. */
  bytes: Buffer;
}

/** A validated, encoded new message, waiting for its MsgID. */
export interface PreparedRecord {
  /**
   * The record, its `id` still empty; `data` is the caller's value. It becomes the
   * put's {@link PutResult.message} once the id is set.
   */
  readonly message: StoredMessage;
  /**
   * The stored bytes: UTF-8 JSON of every field but `id`, which is the record's key
   * (see `keys.ts`) and is added back by {@link decodeRecord}. Encoded before the put
   * is queued, so nothing but this buffer waits for the batch.
   */
  readonly bytes: Buffer;
  /** UTF-8 bytes of the JSON `{type, from, data}` (what the size limit counts). */
  readonly contentBytes: number;
}

/** Limits of {@link prepareRecord}, from the configuration (DESIGN.md §10). */
export interface RecordLimits {
  /** Retention when the message gives none, ms. */
  readonly defaultTtlMs: number;
  /** Largest `{type, from, data}` JSON in UTF-8 bytes (default 64 KiB). */
  readonly maxMessageBytes: number;
  /** Redis's clock, undefined until known: a new message's expiry counts from it less 1 s when later (store-options.ts). */
  readonly redisClock?: (() => number | undefined) | undefined;
}

const MAX_TYPE_CHARS = 64;
/** The arena of callers that bring none (tests, tools). */
const sharedArena = new RecordArena();
/** How every stored record begins (see {@link expiresAtOf}). */
const EXPIRES_AT_PREFIX = '{"expiresAt":';
const CLIENT_MSG_ID = /^[\x20-\x7e]{1,128}$/;
/** Expiry times are written, rounded up to the second (keys.ts `expiryBucket`), as 6-byte big-endian numbers in the expiry index. */
const MAX_EXPIRES_AT = Math.floor((2 ** 48 - 1) / 1000) * 1000;

/** Bytes of `{"type":,"data":}`: the JSON of a message's content around its values. */
const CONTENT_FRAME_BYTES = '{"type":,"data":}'.length;

/**
 * `JSON.stringify(data)`, or INVALID_REQUEST when `data` is not a JSON value or nests
 * deeper than `MAX_DATA_DEPTH` (checked first, so the serialiser never overflows).
 */
function dataJson(data: unknown): string {
  checkData(data);
  let json: string | undefined;
  try {
    json = JSON.stringify(data);
  } catch (err) {
    // BigInt and cyclic structures throw TypeError; its text stays in the logs only.
    throw new PixiuError('INVALID_REQUEST', 'data is not a JSON value (a BigInt or a cycle)', { cause: err });
  }
  if (json === undefined) throw invalid('data must be a JSON value (not undefined, a function or a symbol)');
  return json;
}

function isStringArray(value: unknown): boolean {
  if (!Array.isArray(value)) return false;
  for (const v of value) if (typeof v !== 'string') return false;
  return true;
}

function checkShape(msg: NewMessage): void {
  if (!isMsgKind(msg.kind)) throw invalid(`kind must be 1..4, got ${String(msg.kind)}`);
  if (typeof msg.type !== 'string' || msg.type.length < 1 || msg.type.length > MAX_TYPE_CHARS) {
    throw invalid(`type must be a string of 1-${MAX_TYPE_CHARS} chars`);
  }
  if (msg.from !== undefined && typeof msg.from !== 'string') throw invalid('from must be a string');
  if (msg.room !== undefined && typeof msg.room !== 'string') throw invalid('room must be a string');
  if (msg.to !== undefined && !isStringArray(msg.to)) throw invalid('to must be an array of user ids');
  if (msg.clientMsgId !== undefined && (typeof msg.clientMsgId !== 'string' || !CLIENT_MSG_ID.test(msg.clientMsgId))) {
    throw invalid('client_msg_id must be 1-128 printable ASCII chars');
  }
  if (msg.ttlMs !== undefined && (!Number.isSafeInteger(msg.ttlMs) || msg.ttlMs < 1)) {
    throw invalid('ttl must be a whole number of ms, at least 1');
  }
  if (msg.tsMs !== undefined && (!Number.isSafeInteger(msg.tsMs) || msg.tsMs < 0)) {
    throw invalid('ts must be a whole number of ms since the epoch');
  }
}

/**
 * Checks and encodes a new message, before it takes a MsgID (so a refused message
 * consumes no counter).
 *
 * @param msg the message
 * @param nowMs the store's clock, ms since the epoch: becomes `ts`
 * @param limits default TTL and the size limit
 * @param arena where small records' bytes go (the store's own; default one shared)
 * @throws PixiuError INVALID_REQUEST for a bad field, data that is not JSON, or data
 *   nested deeper than `MAX_DATA_DEPTH` (data-depth.ts)
 * @throws PixiuError PAYLOAD_TOO_LARGE when the UTF-8 JSON of `{type, from, data}` is
 *   over `maxMessageBytes` (DESIGN.md §3, §10); the recipient list is not counted
 */
export function prepareRecord(
  msg: NewMessage, storeNowMs: number, limits: RecordLimits, arena: RecordArena = sharedArena,
): PreparedRecord {
  // Plain locals, no object of them: this runs for every message stored (DESIGN.md §3).
  checkShape(msg);
  const nowMs = msg.tsMs ?? storeNowMs;
  const data = dataJson(msg.data);
  const typeJson = JSON.stringify(msg.type);
  const fromJson = fromJsonOf(msg);
  const expiresAt = expiryOf(msg, nowMs, storeNowMs, limits);
  const fields: StoredMessage = { id: '', kind: msg.kind, type: msg.type, data: msg.data, ts: nowMs, expiresAt };
  // The stored JSON in three pieces, so that `data`, the large one, is copied once,
  // straight from its string into the stored bytes. `expiresAt` comes first: see
  // expiresAtOf.
  const head = `${EXPIRES_AT_PREFIX}${expiresAt},"kind":${msg.kind},"type":${typeJson}${fromJson},"data":`;
  let rest = '';
  if (msg.from !== undefined) fields.from = msg.from;
  if (msg.to !== undefined) {
    fields.to = msg.to.slice();
    rest += `,"to":${JSON.stringify(fields.to)}`;
  }
  if (msg.room !== undefined) {
    fields.room = msg.room;
    rest += `,"room":${JSON.stringify(msg.room)}`;
  }
  rest += `,"ts":${nowMs}`;
  if (msg.clientMsgId !== undefined) {
    fields.clientMsgId = msg.clientMsgId;
    rest += `,"clientMsgId":${JSON.stringify(msg.clientMsgId)}`;
  }
  rest += '}';

  const overheadBytes = overheadBytesOf(typeJson, fromJson);
  // A UTF-16 code unit takes at most 3 UTF-8 bytes: a small record is written into
  // that much arena space and measured by what was written, sparing a scan of `data`
  // to count its bytes first; a large one is measured first and given its own buffer.
  const maxBytes = 3 * (head.length + data.length + rest.length);
  let bytes: Buffer;
  let dataBytes: number;
  if (maxBytes <= arena.maxReserve) {
    const start = arena.reserve(maxBytes);
    const slab = arena.slab;
    let at = start + slab.write(head, start);
    dataBytes = slab.write(data, at);
    checkSize(overheadBytes + dataBytes, limits.maxMessageBytes, measuredOf(msg));
    at += dataBytes;
    at += slab.write(rest, at);
    bytes = arena.commit(at - start);
  } else {
    dataBytes = Buffer.byteLength(data);
    checkSize(overheadBytes + dataBytes, limits.maxMessageBytes, measuredOf(msg));
    bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(head) + dataBytes + Buffer.byteLength(rest));
    const at = bytes.write(head);
    bytes.write(rest, at + bytes.write(data, at));
  }
  return { message: fields, bytes, contentBytes: overheadBytes + dataBytes };
}

/**
 * Checks a new message as {@link prepareRecord} does, without encoding it: run when the
 * node's recipient budget refuses a request (src/api/routes/batch-items.ts), so that a
 * message refused for itself gets its own error whatever the load.
 * @param storeNowMs the store's clock, ms since the epoch
 * @throws PixiuError INVALID_REQUEST and PAYLOAD_TOO_LARGE as {@link prepareRecord}
 */
export function checkRecord(msg: NewMessage, storeNowMs: number, limits: RecordLimits): void {
  // prepareRecord's checks in its order, sharing its helpers but not its locals.
  checkShape(msg);
  const data = dataJson(msg.data);
  expiryOf(msg, msg.tsMs ?? storeNowMs, storeNowMs, limits);
  const contentBytes = overheadBytesOf(JSON.stringify(msg.type), fromJsonOf(msg)) + Buffer.byteLength(data);
  checkSize(contentBytes, limits.maxMessageBytes, measuredOf(msg));
}

/** The `,"from":…` piece of a message's JSON, or '' when it has none. */
function fromJsonOf(msg: NewMessage): string {
  return msg.from === undefined ? '' : `,"from":${JSON.stringify(msg.from)}`;
}

/**
 * A new message's `expiresAt`, ms since the epoch.
 * @param nowMs its `ts`
 * @throws PixiuError INVALID_REQUEST when it is past what the expiry index holds
 */
function expiryOf(msg: NewMessage, nowMs: number, storeNowMs: number, limits: RecordLimits): number {
  // Retention counts from the later of `ts` and the store's clock: the store reads and
  // sweeps by its own clock, and a room message's `ts` is Redis's (tsMs), so counted
  // from `ts` alone a node whose clock runs ahead of Redis's by more than the ttl
  // stored the message already expired (201, then a gap for every member). Likewise
  // from Redis's clock less the skew tolerated when later (a direct message's `ts` is
  // the store's): on a node behind Redis's clock by more than the ttl, its messages were
  // `expired` at once for the other nodes' readers (walk31 F3). Less the tolerance, so a
  // node in step keeps `expiresAt` = `ts` + ttl exactly.
  const expiresAt = Math.max(nowMs, storeNowMs, (limits.redisClock?.() ?? 0) - CLOCK_SKEW_BOUND_MS) + (msg.ttlMs ?? limits.defaultTtlMs);
  if (expiresAt > MAX_EXPIRES_AT) throw invalid('ttl is too large');
  return expiresAt;
}

/** UTF-8 bytes of exactly `JSON.stringify({type, from, data})` but `data`'s, without building it. */
function overheadBytesOf(typeJson: string, fromJson: string): number {
  return Buffer.byteLength(typeJson) + Buffer.byteLength(fromJson) + CONTENT_FRAME_BYTES;
}

/**
 * What the size error names: exactly the fields counted. A broadcast has no `from`; a
 * user or room message sent without one is told that a `from` would count too.
 */
function measuredOf(msg: NewMessage): { name: string; fields: string } {
  return msg.from !== undefined ? MEASURED_WITH_FROM : msg.kind === MsgKind.broadcast ? MEASURED_BROADCAST : MEASURED_WITHOUT_FROM;
}

/** How the size error names what it measured ({@link checkSize}). */
const MEASURED_WITH_FROM = { name: 'message', fields: '{type, from, data}' };
const MEASURED_WITHOUT_FROM = { name: 'message', fields: '{type, data}; a from would count too' };
const MEASURED_BROADCAST = { name: 'message', fields: '{type, data}' };
const MEASURED_PUBLICATION = { name: 'publication', fields: '{type, data}' };

/**
 * @param what what is measured and of which fields, for the error's message
 * @throws PixiuError PAYLOAD_TOO_LARGE when `contentBytes` is over the limit, naming
 *   exactly what was counted: the UTF-8 bytes of `JSON.stringify` of those fields
 */
function checkSize(contentBytes: number, maxMessageBytes: number, what: { name: string; fields: string }): void {
  if (contentBytes > maxMessageBytes) {
    throw new PixiuError('PAYLOAD_TOO_LARGE',
      `${what.name} is ${contentBytes} bytes (the UTF-8 JSON of ${what.fields}), over the limit of ${maxMessageBytes} bytes (PIXIU_MAX_MESSAGE_BYTES)`);
  }
}

/**
 * The JSON of a channel publication's `data` (channels are not stored), checked as a
 * message's content is ({@link prepareRecord}): a JSON value nested at most
 * `MAX_DATA_DEPTH` levels, and `JSON.stringify({type, data})` at most `maxBytes`.
 *
 * @throws PixiuError INVALID_REQUEST for data that is no JSON value or nests too
 *   deep; PAYLOAD_TOO_LARGE over `maxBytes`
 */
export function publicationDataJson(type: string, data: unknown, maxBytes: number): string {
  const json = dataJson(data);
  checkSize(Buffer.byteLength(json) + Buffer.byteLength(JSON.stringify(type)) + CONTENT_FRAME_BYTES, maxBytes, MEASURED_PUBLICATION);
  return json;
}

/**
 * The `expiresAt` of stored bytes without decoding them. Every record is written
 * starting `{"expiresAt":<ms>,` (by {@link prepareRecord}), so the read cache can
 * check a cached record's expiry without keeping it decoded or keeping a second
 * object beside its bytes.
 * @returns the expiry in ms, or NaN when the bytes do not start that way
 */
export function expiresAtOf(bytes: Buffer): number {
  const start = EXPIRES_AT_PREFIX.length;
  if (bytes.toString('latin1', 0, start) !== EXPIRES_AT_PREFIX) return NaN;
  let n = 0;
  let at = start;
  for (let c = bytes[at]; c !== undefined && c >= 0x30 && c <= 0x39; c = bytes[++at]) n = n * 10 + (c - 0x30);
  return at > start && bytes[at] === 0x2c ? n : NaN;
}

/**
 * Decodes a stored record and deep-freezes it.
 * @param bytes the stored bytes
 * @param id the record's MsgID (its key)
 * @throws PixiuError INTERNAL when the stored bytes are not a record (disk corruption)
 */
export function decodeRecord(bytes: Buffer, id: string): StoredMessage {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw undecodable(id, err);
  }
  return recordOf(value, id);
}

/**
 * A record from its parsed JSON (stored bytes, or a record another node sent,
 * src/cluster/store-router.ts), with `id` set, deep-frozen like every record read.
 * A record is an object with a numeric `expiresAt` and `ts`, a string `type`, a `data`
 * and a `kind` this release knows (1..4): records carry no version field, so a kind
 * it does not know is what a record of a later format would look like. What readers
 * need is checked, no more: a normal record costs a few type tests.
 * @throws PixiuError INTERNAL when `value` is not a record (src/store/unreadable.ts:
 *   readers answer it as unreadable, a gap)
 */
export function recordOf(value: unknown, id: string): StoredMessage {
  if (typeof value !== 'object' || value === null) throw undecodable(id);
  const r = value as StoredMessage;
  if (typeof r.expiresAt !== 'number' || typeof r.ts !== 'number' || typeof r.type !== 'string' || !isMsgKind(r.kind) || !('data' in r)) {
    throw undecodable(id);
  }
  // `id` first, as the stored JSON leaves it out; a sent record's own `id` cannot replace it.
  return deepFreeze(Object.assign({ id }, value, { id })) as StoredMessage;
}

/** The error of stored bytes that are no record (a permanent condition, unlike UNAVAILABLE). */
function undecodable(id: string, cause?: unknown): PixiuError {
  return new PixiuError('INTERNAL', `stored message ${id} cannot be decoded`, cause === undefined ? undefined : { cause });
}

/** Freezes a JSON value and everything in it; iterative, so deep nesting cannot overflow. */
function deepFreeze(root: object): object {
  const stack: object[] = [root];
  for (let o = stack.pop(); o !== undefined; o = stack.pop()) {
    Object.freeze(o);
    for (const v of Object.values(o)) if (typeof v === 'object' && v !== null) stack.push(v as object);
  }
  return root;
}

/**
 * The answer to a duplicate of a put in flight (partition.ts), from the first put's
 * result and the bytes it asked to store. When that put was itself a duplicate (of a
 * record already stored), its bytes were never written: the answer is the stored
 * record and its own bytes — with the in-flight put's, a retry refused 409 (other
 * content) was cached under the stored MsgID and served as it (a fresh review's finding).
 */
export function duplicateOf(first: PutResult, bytes: Buffer): PutResult {
  // Answer the record as stored (frozen), not the first caller's own `data` object.
  if (first.duplicate) return { id: first.id, duplicate: true, message: first.message, bytes: first.bytes };
  return { id: first.id, duplicate: true, message: decodeRecord(bytes, first.id), bytes };
}
