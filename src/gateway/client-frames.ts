/**
 * Client → server frames of the WebSocket protocol v1 (DESIGN.md §6), parsed and
 * validated in one place. Each frame is one JSON text object with a `t` field:
 * `ack {seq}`, `ping {}`, `refresh {token}`, `sub {channel}`, `unsub {channel}`.
 * A frame that does not parse is answered with an `error` frame, never a crash.
 */
import { MAX_CHANNEL_LENGTH } from '../channels/patterns.js';
import type { ErrorRef } from '../delivery/frames.js';
import { PixiuError, invalid } from '../errors.js';
import { quotedText } from '../text-cut.js';
import { isWellFormed } from '../api/lone-surrogates.js';
import { MAX_TOKEN_CHARS } from '../auth/jwt-form.js';

/** A parsed client frame. */
export type ClientFrame =
  | { readonly t: 'ack'; readonly seq: number; readonly epoch?: string }
  | { readonly t: 'ping' }
  | { readonly t: 'refresh'; readonly token: string }
  | { readonly t: 'sub'; readonly channel: string; readonly since?: string }
  | { readonly t: 'unsub'; readonly channel: string };

const KNOWN = new Set(['ack', 'ping', 'refresh', 'sub', 'unsub']);

/**
 * A frame refused while parsing (INVALID_REQUEST). `ref` names it when it is of a known
 * `t` — a `sub`, `unsub`, `refresh`, `ack` or `ping` —, so that a client can tell which
 * of its frames went unanswered (docs/protocol.md, the `error` frame); undefined for one
 * that is not JSON, not an object, or of no known `t`.
 */
export class FrameRefused extends PixiuError {
  readonly ref: ErrorRef | undefined;

  constructor(message: string, ref?: ErrorRef) {
    super('INVALID_REQUEST', message);
    this.ref = ref;
  }
}

/**
 * The `ref` of a refused `sub`, `unsub`, `refresh`, `ack` or `ping`: its `t`, and a
 * `sub`'s or `unsub`'s `channel` when that is a string ({@link channelRef}). A `ping`'s
 * too (the walk14 tester's F5: `{"t":"ping","x":1}` had none, a case protocol.md did
 * not cover): a client waiting on its pong learns it will not come.
 */
function refOf(o: Record<string, unknown>): ErrorRef | undefined {
  if (o.t === 'ack' || o.t === 'ping') return { t: o.t };
  if (o.t !== 'sub' && o.t !== 'unsub' && o.t !== 'refresh') return undefined;
  return o.t === 'refresh' ? { t: o.t } : channelRef(o.t, o.channel);
}

/**
 * The `ref` of a refused `sub` or `unsub`: `{t, channel}` when the channel is a string
 * the client can read back, else `{t}`. A channel holding a lone surrogate (sent as a
 * `\ud800` escape; refused as not a channel name) is left out: echoed, it would be a
 * frame a strict decoder (Rust's serde_json, Swift's JSONDecoder) refuses whole — the
 * reason ids and `data` refuse lone surrogates (docs/api.md "Input rules"; the fidelity
 * walk's F2). The error's `message` still names it, escaped as text (connection-channels.ts `notAChannel`).
 */
export function channelRef(t: 'sub' | 'unsub', channel: unknown): ErrorRef {
  return typeof channel === 'string' && isWellFormed(channel) ? { t, channel } : { t };
}

function onlyFields(o: Record<string, unknown>, allowed: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (k !== 't' && !allowed.includes(k)) throw invalid(`${String(o.t)} frame has an unknown field ${quotedText(k, 40)}`);
  }
}


function nonEmptyString(o: Record<string, unknown>, field: string, max: number): string {
  const v = o[field];
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    throw invalid(`${String(o.t)} frame needs ${field}: a string of 1-${max} characters`);
  }
  return v;
}

/** True for a well-formed `ack` frame (one {@link parseClientFrame} takes as an `ack`). */
export function isAckFrame(text: string): boolean {
  // Cheap first: every other frame, and most malformed ones, stop here.
  if (!text.includes('"ack"')) return false;
  try {
    return parseClientFrame(text).t === 'ack';
  } catch {
    return false;
  }
}

/** What every `refresh` frame holds, its `t`: the frames without it are passed over undecoded. */
const REFRESH_T = Buffer.from('"refresh"');

/**
 * The token of a well-formed `refresh` frame (one {@link parseClientFrame} takes as a
 * `refresh`); undefined for any other frame. Cheap for the others: a Buffer without
 * `"refresh"` in it is neither decoded nor parsed.
 */
export function refreshFrameToken(data: { toString(): string }): string | undefined {
  if (Buffer.isBuffer(data) && !data.includes(REFRESH_T)) return undefined;
  try {
    const frame = parseClientFrame(data.toString());
    return frame.t === 'refresh' ? frame.token : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One received WebSocket message as a frame, or the refusal of a bad one (a binary
 * frame, or one {@link parseClientFrame} refuses) to answer it with. Never throws.
 */
export function readClientFrame(data: { toString(): string }, isBinary: boolean): ClientFrame | PixiuError {
  if (isBinary) return new PixiuError('INVALID_REQUEST', 'binary frames are not supported; send JSON text');
  try {
    return parseClientFrame(data.toString());
  } catch (err) {
    return err instanceof PixiuError ? err : new PixiuError('INVALID_REQUEST', 'malformed frame');
  }
}

/**
 * Parses one text frame.
 * @throws FrameRefused (INVALID_REQUEST) naming what is wrong (not JSON, not an
 *   object, unknown `t`, a field of the wrong type, an unknown field), with the
 *   frame's `ref` for a frame of a known `t`
 */
export function parseClientFrame(text: string): ClientFrame {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new FrameRefused('frame is not valid JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new FrameRefused('frame must be a JSON object with a "t" field');
  const o = v as Record<string, unknown>;
  // A missing or non-string `t` is named as such: `unknown frame type ""` told the
  // client nothing about what was wrong.
  if (typeof o.t !== 'string') throw new FrameRefused('frame needs "t": one of ack, ping, refresh, sub or unsub');
  if (!KNOWN.has(o.t)) {
    throw new FrameRefused(`unknown frame type ${quotedText(o.t, 40)}; expected ack, ping, refresh, sub or unsub`);
  }
  try {
    return fieldsOf(o);
  } catch (err) {
    throw new FrameRefused(err instanceof Error ? err.message : 'malformed frame', refOf(o));
  }
}

/** The frame of a known `t`, its fields checked. @throws PixiuError INVALID_REQUEST */
function fieldsOf(o: Record<string, unknown>): ClientFrame {
  switch (o.t) {
    case 'ack': {
      onlyFields(o, ['seq', 'epoch']);
      const seq = o.seq;
      if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
        // Seqs are safe integers (DESIGN.md §2): one past 2^53 - 1 cannot be told from its neighbours.
        throw invalid(`ack frame needs seq: an integer from 0 to ${Number.MAX_SAFE_INTEGER}`);
      }
      // The epoch the seq counts in (welcome's or the last reset's); null: none known.
      if (o.epoch === undefined || o.epoch === null) return { t: 'ack', seq };
      if (typeof o.epoch !== 'string' || o.epoch.length === 0 || o.epoch.length > 64) {
        throw invalid('ack frame\'s epoch, when given, is the epoch of welcome or reset: a string of 1-64 characters (or null)');
      }
      return { t: 'ack', seq, epoch: o.epoch };
    }
    case 'ping':
      onlyFields(o, []);
      return { t: 'ping' };
    case 'refresh':
      onlyFields(o, ['token']);
      // Not "a string of 1-N characters": the frame limit (4 KiB by default) closes the
      // connection 1009 well before MAX_TOKEN_CHARS, so naming it promised what cannot be sent.
      if (typeof o.token !== 'string' || o.token.length === 0) throw invalid('refresh frame needs token: the new JWT, a non-empty string');
      if (o.token.length > MAX_TOKEN_CHARS) throw invalid(`refresh frame's token is over ${MAX_TOKEN_CHARS} characters`);
      return { t: 'refresh', token: o.token };
    case 'sub': {
      onlyFields(o, ['channel', 'since']);
      const channel = nonEmptyString(o, 'channel', MAX_CHANNEL_LENGTH);
      // null: none, as an ack's epoch (a client passing on what it has not got yet).
      if (o.since === undefined || o.since === null) return { t: 'sub', channel };
      return { t: 'sub', channel, since: nonEmptyString(o, 'since', 64) };
    }
    default:
      onlyFields(o, ['channel']);
      return { t: 'unsub', channel: nonEmptyString(o, 'channel', MAX_CHANNEL_LENGTH) };
  }
}
