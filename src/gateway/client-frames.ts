/**
 * Client → server frames of the WebSocket protocol v1 (DESIGN.md §6), parsed and
 * validated in one place. Each frame is one JSON text object with a `t` field:
 * `ack {seq}`, `ping {}`, `refresh {token}`, `sub {channel}`, `unsub {channel}`.
 * A frame that does not parse is answered with an `error` frame, never a crash.
 */
import { MAX_CHANNEL_LENGTH } from '../channels/patterns.js';
import { invalid } from '../errors.js';

/** A parsed client frame. */
export type ClientFrame =
  | { readonly t: 'ack'; readonly seq: number }
  | { readonly t: 'ping' }
  | { readonly t: 'refresh'; readonly token: string }
  | { readonly t: 'sub'; readonly channel: string; readonly since?: string }
  | { readonly t: 'unsub'; readonly channel: string };

const KNOWN = new Set(['ack', 'ping', 'refresh', 'sub', 'unsub']);

function onlyFields(o: Record<string, unknown>, allowed: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (k !== 't' && !allowed.includes(k)) throw invalid(`${String(o.t)} frame has an unknown field ${JSON.stringify(k)}`);
  }
}

function nonEmptyString(o: Record<string, unknown>, field: string, max: number): string {
  const v = o[field];
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    throw invalid(`${String(o.t)} frame needs ${field}: a string of 1-${max} characters`);
  }
  return v;
}

/**
 * Parses one text frame.
 * @throws PixiuError INVALID_REQUEST naming what is wrong (not JSON, not an object,
 *   unknown `t`, a field of the wrong type, an unknown field)
 */
export function parseClientFrame(text: string): ClientFrame {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw invalid('frame is not valid JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid('frame must be a JSON object with a "t" field');
  const o = v as Record<string, unknown>;
  // A missing or non-string `t` is named as such: `unknown frame type ""` told the
  // client nothing about what was wrong.
  if (typeof o.t !== 'string') throw invalid('frame needs "t": one of ack, ping, refresh, sub or unsub');
  if (!KNOWN.has(o.t)) {
    throw invalid(`unknown frame type ${JSON.stringify(o.t).slice(0, 40)}; expected ack, ping, refresh, sub or unsub`);
  }
  switch (o.t) {
    case 'ack': {
      onlyFields(o, ['seq']);
      const seq = o.seq;
      if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
        throw invalid('ack frame needs seq: a non-negative integer');
      }
      return { t: 'ack', seq };
    }
    case 'ping':
      onlyFields(o, []);
      return { t: 'ping' };
    case 'refresh':
      onlyFields(o, ['token']);
      return { t: 'refresh', token: nonEmptyString(o, 'token', 8192) };
    case 'sub': {
      onlyFields(o, ['channel', 'since']);
      const channel = nonEmptyString(o, 'channel', MAX_CHANNEL_LENGTH);
      if (o.since === undefined) return { t: 'sub', channel };
      return { t: 'sub', channel, since: nonEmptyString(o, 'since', 64) };
    }
    default:
      onlyFields(o, ['channel']);
      return { t: 'unsub', channel: nonEmptyString(o, 'channel', MAX_CHANNEL_LENGTH) };
  }
}
