/**
 * What a connection closes with when `ws`'s receiver refuses a client frame: the
 * receiver's error codes mapped to the close codes of RFC 6455 §7.4.1, so that the
 * close is counted and logged as what the server decided (ws-connection.ts); and how it
 * stops parsing a client it closed for abuse, ending the connection once the client
 * answers the close.
 */
import type { Socket } from 'node:net';
import { dropIncoming, type DropLimits } from '../drop-incoming.js';
import { CloseFrameSpotter } from './close-frame-spotter.js';

/**
 * The close code `ws` sends when its receiver refuses a client frame (RFC 6455 §7.4.1):
 * 1009 for a frame over the size cap, 1008 for too many fragments, 1007 for text that
 * is not UTF-8, 1002 for any other protocol error. Undefined for other errors (a socket
 * error: the peer is gone, 1006).
 */
export function refusalCloseCode(err: Error & { code?: string }): number | undefined {
  switch (err.code) {
    case 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH':
    case 'WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH':
      return 1009;
    case 'WS_ERR_TOO_MANY_BUFFERED_PARTS':
      return 1008;
    case 'WS_ERR_INVALID_UTF8':
      return 1007;
    default:
      return err.code?.startsWith('WS_ERR_') === true ? 1002 : undefined;
  }
}

/**
 * The socket 'data' listeners that feed `ws`'s receiver, the frame parser: those a
 * socket has when `ws` hands the connection over ({@link noteFrameParsers}). In ws 8
 * that is one function for every socket (its `socketOnData`), which `ws` takes off by
 * identity itself once it has a close frame; ws exports no way to name it, hence this.
 */
const frameParsers = new WeakSet<Function>();

/**
 * Notes the 'data' listeners `socket` has as it is handed over by `ws` (its
 * 'connection' event, before anything else listens) as those that parse frames: they
 * are `ws`'s alone then, as Node's HTTP server took its parser's off at the upgrade
 * (lib/_http_server.js, `onParserExecuteCommon`). A listener added after is not one.
 */
export function noteFrameParsers(socket: Socket): void {
  for (const listener of socket.listeners('data')) frameParsers.add(listener);
}

/**
 * Stops parsing what the client sends on `socket`, once the server has sent its close
 * frame for protocol abuse (4003): `ws`'s receiver is taken off (only it: another
 * 'data' listener stays) and the bytes are read and dropped, as `ws` itself does once
 * it has a close frame or refused a frame, so the socket's end — the client answering
 * the close — still ends the connection. Within `limits` (drop-incoming.ts): past
 * `limits.maxBytes` or `limits.ms` the socket is destroyed. A flooder writing on through
 * the close's grace (5 s) had the node parse some 10 M acks or pongs it then ignored,
 * holding every producer's POSTs for seconds (a hostile-input newcomer's finding); and
 * once they were dropped unparsed but without a cap, the node still read 850 MB of them
 * in the grace on loopback (the cap: frame-limits.ts `abuseDropBytes`).
 *
 * The dropped bytes' frame headers are walked (close-frame-spotter.ts, RFC 6455 §5.2),
 * their payloads skipped unread: once the client's close frame has arrived, the close
 * handshake is done (RFC 6455 §5.5.1) and the server ends TCP first (§7.1.1) with
 * `socket.end()` — a FIN after the close frame already written, not a reset that could
 * discard it. A client that waits for that, as RFC 6455 says it should, stayed in
 * CLOSING for the whole grace (a black-box tester's finding). The walk starts where
 * `ws` (`ws`'s WebSocket, for its receiver) stopped: inside the frame it had begun, when
 * it had; where its state cannot be read, nothing is spotted and the grace ends the
 * connection, as before.
 * @param limits the byte cap (and time limit, if any) of the drop
 * @param ws the connection's `ws` WebSocket, whose receiver's state tells where the walk
 *   of frame headers starts; without it no close frame is looked for
 */
export function dropClientBytes(socket: Socket, limits: DropLimits, ws?: object): void {
  for (const listener of socket.listeners('data')) {
    if (frameParsers.has(listener)) socket.removeListener('data', listener as (chunk: Buffer) => void);
  }
  dropIncoming(socket, limits);
  if (ws === undefined) return;
  let spotter: CloseFrameSpotter | undefined | null;
  const spot = (chunk: Buffer): void => {
    // Read at the first chunk, not at the close: a 4003 decided inside `ws`'s parse of a
    // chunk is followed by the rest of that chunk's frames, parsed before this runs.
    if (spotter === undefined) spotter = spotterAfterReceiver((ws as { _receiver?: unknown })._receiver) ?? null;
    if (spotter === null || spotter.push(chunk)) {
      socket.removeListener('data', spot);
      if (spotter !== null && !socket.destroyed) socket.end();
    }
  };
  socket.on('data', spot);
}

/** The states of ws 8's frame parser (ws/lib/receiver.js: GET_INFO … GET_DATA). */
const ReceiverState = { info: 0, length16: 1, length64: 2, mask: 3, data: 4 } as const;

/** What {@link spotterAfterReceiver} reads of `ws`'s receiver: its private fields (ws 8). */
interface ReceiverFields {
  readonly _state?: unknown;
  readonly _errored?: unknown;
  readonly _opcode?: unknown;
  readonly _masked?: unknown;
  readonly _payloadLength?: unknown;
  readonly _bufferedBytes?: unknown;
  readonly _buffers?: unknown;
}

/**
 * A close-frame spotter that starts where `ws`'s receiver stopped (RFC 6455 §5.2): what
 * it holds of a frame it began (a header's first bytes, or part of a payload whose
 * header it read) is where the client's next bytes go on from. Undefined when it has
 * a close frame already (`ws` ends the connection itself), has failed, or its state is
 * not one of ws 8's parsing states (then the walk cannot know where frames start).
 */
function spotterAfterReceiver(receiver: unknown): CloseFrameSpotter | undefined {
  if (typeof receiver !== 'object' || receiver === null) return undefined;
  const r = receiver as ReceiverFields;
  const { _state: state, _opcode: opcode, _payloadLength: payloadLength, _bufferedBytes: buffered, _buffers: buffers } = r;
  if (r._errored === true || typeof opcode !== 'number' || typeof payloadLength !== 'number' || typeof buffered !== 'number') return undefined;
  if (!Array.isArray(buffers) || !buffers.every((b) => b instanceof Uint8Array)) return undefined;
  const held = Buffer.concat(buffers as Uint8Array[]);
  if (held.length !== buffered) return undefined;
  switch (state) {
    case ReceiverState.info: {
      // Between frames; a close frame parsed (its opcode stays) is `ws`'s to answer.
      if (opcode === 0x8) return undefined;
      const spotter = new CloseFrameSpotter();
      spotter.push(held);
      return spotter;
    }
    case ReceiverState.length16:
    case ReceiverState.length64: {
      // Bytes 0 and 1 were consumed: put them back as they were read, then the extended length's first bytes.
      const spotter = new CloseFrameSpotter();
      spotter.push(Uint8Array.of(opcode, (r._masked === true ? 0x80 : 0) | (state === ReceiverState.length16 ? 126 : 127)));
      spotter.push(held);
      return spotter;
    }
    case ReceiverState.mask:
      return CloseFrameSpotter.midFrame(opcode, 4 - buffered + payloadLength);
    case ReceiverState.data:
      return CloseFrameSpotter.midFrame(opcode, payloadLength - buffered);
    default:
      return undefined;
  }
}
