/**
 * Writes one frame a user's machine sent (a `send` effect, session.ts) on its
 * connection: a `welcome` gets the connection's `bseq`; the frame is serialised once
 * (a `msg` as UTF-8 bytes, its `data` encoded once per node, or as written when its
 * page was sized: msg-frame-bytes.ts) and
 * its length counted in the turn's share (send-turns.ts); a `msg` that cannot be
 * serialised goes out as a `gap` of its seq, reason `undeliverable`.
 */
import type { Logger } from '../logger.js';
import type { GapFrame, ServerFrame } from './frames.js';
import { msgFrameBytes } from './msg-frame-bytes.js';
import { spend } from './send-turns.js';
import type { DeliveryConnection } from './session.js';

/**
 * Sends `frame` on `conn`, then tells a `welcome`'s connection it was written
 * (DeliveryConnection `welcomed`). Never throws.
 * @param user the connection's user (log context)
 * @param onGap called with a `gap` frame once written (one sent in a `msg`'s place too)
 * @returns the seq of a `msg` sent as an `undeliverable` gap instead, which the
 *   machine must be told of (machine.ts `undeliverable`); undefined otherwise (sent, or
 *   a frame other than a `msg` that cannot be serialised: logged and dropped)
 */
export function sendFrame(conn: DeliveryConnection, frame: ServerFrame, logger: Logger, user: string, onGap?: (gap: GapFrame) => void): number | undefined {
  let out = frame;
  if (out.t === 'welcome') {
    const bseq = conn.welcomeBseq?.();
    if (bseq !== undefined) out = { ...out, bseq };
  }
  let text = serialise(out, logger, user);
  let gapOf: number | undefined;
  if (text === undefined) {
    if (out.t !== 'msg') return undefined;
    // In its place, in seq order: a gap of its seq, `undeliverable` (its content
    // is there: a client may say so rather than "expired").
    gapOf = out.seq;
    // Marked as the msg was: a redelivery round resends a seq that went out before.
    // And with the epoch the msg carried (the first after a null epoch).
    out = {
      t: 'gap', from: out.seq, to: out.seq, reason: 'undeliverable',
      ...(out.redelivered === true ? { redelivered: true as const } : {}), ...(out.epoch !== undefined ? { epoch: out.epoch } : {}),
    };
    text = JSON.stringify(out);
  }
  // Bytes, as the budget counts them: a string's UTF-8 length, not its UTF-16 units.
  spend(typeof text === 'string' ? Buffer.byteLength(text) : text.length);
  conn.send(text, out.t);
  if (out.t === 'welcome') conn.welcomed?.();
  else if (out.t === 'gap') onGap?.(out);
  return gapOf;
}

/**
 * The JSON of a frame (a `msg`'s as UTF-8 bytes, its `data` encoded once per node:
 * msg-frame-bytes.ts), or undefined when it cannot be serialised. Ingest refuses
 * data nested past `MAX_DATA_DEPTH`, but a record stored before that limit (or any
 * other serialiser failure) must cost its seq, never the process: the failure is
 * logged with the MsgID and the seq then goes out as a `gap`, reason `undeliverable`.
 */
function serialise(frame: ServerFrame, logger: Logger, user: string): string | Buffer | undefined {
  try {
    return frame.t === 'msg' ? msgFrameBytes(frame) : JSON.stringify(frame);
  } catch (err) {
    const context = frame.t === 'msg' ? { msgId: frame.id, seq: frame.seq } : {};
    logger.error({ err, user, t: frame.t, ...context }, 'frame cannot be serialised (a msg goes out as a gap)');
    return undefined;
  }
}
