/**
 * A connection's `sub` and `unsub` frames (DESIGN.md §8, docs/protocol.md "Client →
 * server"): a `sub` that follows is answered `subscribed` (written by the connection's
 * channels, before the channel's publications: ConnectionChannels `sub`); an `unsub`
 * is silent; a refusal is an `error` frame naming the channel.
 */
import { PixiuError } from '../errors.js';
import { isWrongTypeFailure, type WrongTypeKeys } from '../redis/wrong-type.js';
import type { ErrorRef } from '../delivery/frames.js';
import type { ConnectionChannels } from '../channels/connection-channels.js';
import { channelRef, type ClientFrame } from './client-frames.js';

/** How a channel frame is answered: the connection's `error` frames. */
export interface ChannelFrameAnswers {
  /** An `error` frame: a well-formed frame refused (FORBIDDEN, RATE_LIMITED) or an outage. */
  sendError(err: PixiuError, ref: ErrorRef): void;
  /** A malformed frame's `error`, counted towards the connection's bad-frame limit (4003 past it). */
  refuse(err: PixiuError, ref: ErrorRef): void;
  /**
   * Logs a `sub` that a channel key of the wrong type failed ({@link SUB_FAILED_LOG}):
   * a fault of the data in Redis an operator must repair, where an outage's is not
   * logged here (the node logs Redis's outage itself).
   */
  logWrongType(err: PixiuError & { readonly cause: WrongTypeKeys }, channel: string): void;
}

/**
 * The line of a `sub` failed by a channel's key of the wrong type (its history not a
 * stream): at error, thinned across the node's connections as a broadcast catch-up's
 * (docs/api.md "Errors", 500), its `err` naming the key, its type and the expected one.
 */
export const SUB_FAILED_LOG = 'channel subscription failed; the channel is not followed';

/**
 * Handles one `sub` or `unsub`.
 * @param channels the connection's channels; undefined when this service has none
 *   (every channel frame is then refused INVALID_REQUEST)
 * @returns a promise, never rejecting, that settles once the frame is answered (the
 *   connection's next frame waits for it); undefined when answered at once
 */
export function channelFrame(
  frame: Extract<ClientFrame, { t: 'sub' | 'unsub' }>,
  channels: ConnectionChannels | undefined,
  answers: ChannelFrameAnswers,
): Promise<void> | undefined {
  const ref: ErrorRef = channelRef(frame.t, frame.channel);
  if (channels === undefined) {
    answers.sendError(new PixiuError('INVALID_REQUEST', 'channels are not available on this service'), ref);
    return undefined;
  }
  const done = frame.t === 'sub' ? channels.sub(frame.channel, frame.since) : channels.unsub(frame.channel);
  return done.catch((err: unknown) => {
    const e = err instanceof PixiuError ? err : new PixiuError('UNAVAILABLE', 'channel operation failed, retry');
    // A malformed sub (bad name or since) is a bad frame and counts towards the
    // abuse limit; a well-formed one refused (FORBIDDEN, RATE_LIMITED) or an outage
    // is not the client's protocol fault (docs/protocol.md, "Client → server").
    if (e.code === 'INVALID_REQUEST') answers.refuse(e, ref);
    else answers.sendError(e, ref);
    if (isWrongTypeFailure(e)) answers.logWrongType(e, frame.channel);
  });
}
