/**
 * What the gateway's routes need, as an interface, so a route module depends on the
 * parts it uses and not on how the gateway was assembled (src/gateway/gateway.ts).
 */
import type { ClientClaims, TokenVerifier } from '../auth/jwt.js';
import type { Presence, ReplacedEntry } from '../cluster/presence.js';
import type { Config } from '../config/config.js';
import type { Hub } from '../delivery/hub.js';
import type { CloseSide } from '../delivery/close-codes.js';
import type { AckOutcome } from '../delivery/effects.js';
import type { FrameType } from '../delivery/frames.js';
import type { Inbox } from '../inbox/inbox.js';
import type { Logger } from '../logger.js';
import type { RecordReader } from '../store/record-reader.js';
import type { BroadcastStream } from '../broadcast/broadcast-stream.js';
import type { BroadcastFanout } from '../broadcast/fanout.js';
import type { ChannelDeps } from '../channels/connection-channels.js';
import type { LogThrottle } from '../log-throttle.js';
import type { BufferBudget } from './buffer-budget.js';
import type { CloseLogThinning } from './close-log.js';
import type { ClientOf } from '../api/client-ip.js';
import type { ConnectionClock } from './connection-clock.js';
import type { PendingHandshakes } from './pending-handshakes.js';
import type { WsConnection } from './ws-connection.js';

/** The gateway's parts, as its routes see them. */
export interface GatewayDeps {
  readonly config: Config;
  /**
   * WebSocket connections this node holds at most, open or opening: `PIXIU_MAX_CONNECTIONS`,
   * or the default derived from the open-files limit (connection-bound.ts).
   */
  readonly maxConnections: number;
  readonly inbox: Inbox;
  /** Message records, wherever their partition is (src/cluster/store-router.ts). */
  readonly store: RecordReader;
  readonly verify: TokenVerifier;
  readonly presence: Presence;
  readonly hub: Hub;
  readonly logger: Logger;
  /** False once shutdown began: new connections are refused with 503. */
  readonly state: { accepting: boolean };
  /** Connections admitted to presence whose WebSocket is not open yet, and the kicks kept for them. */
  readonly handshakes: PendingHandshakes;
  /** Handed to every {@link WsConnection}. */
  readonly connection: ConnectionDeps;
  /**
   * Closes each connection of `user` a new one of its device replaced (4002), or marks
   * its pending handshake to close once open, here or on the node holding it.
   */
  kickReplaced(user: string, replaced: readonly ReplacedEntry[]): void;
  /**
   * Closes a user's connections on every node (all, or one device's).
   * @returns how many connections were asked to close
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  kickUser(user: string, device: string | undefined, code: number, reason: string): Promise<number>;
  /**
   * A handshake was accepted: its WebSocket opened (101), whether or not it then became
   * a connection (metrics: `pixiu_ws_handshakes_total{outcome="accepted"}`).
   */
  onAccepted(): void;
  /**
   * A handshake whose client had left before it took effect (FIN or RST behind the
   * request, abandoned-handshakes.ts): dropped unanswered, the device's connection untouched
   * (metrics: `pixiu_ws_handshakes_total{outcome="abandoned"}`).
   */
  onAbandoned(): void;
  /** A connection was opened (metrics). */
  onOpen(conn: WsConnection, claims: ClientClaims): void;
  /**
   * A WebSocket closed by the server as it opened, before it became a connection (a
   * handshake replaced while its upgrade was under way: 4002), with its close code
   * (metrics: every close the server decides is counted, docs/protocol.md).
   */
  onClosedAtOpen(code: number): void;
}

/** What a connection needs from the service. */
export interface ConnectionDeps {
  readonly config: Config;
  /** Corked frames are written out once a socket's queue holds this many bytes (tick-cork.ts `corkFlushBytes`). */
  readonly corkFlushBytes: number;
  /** The node's running sum of what its WebSockets hold unsent, and its budget (buffer-budget.ts). */
  readonly bufferBudget: BufferBudget;
  readonly hub: Hub;
  readonly verify: TokenVerifier;
  readonly logger: Logger;
  /** The node's clock: pings, idle closes and token expiry for every connection. */
  readonly clock: ConnectionClock;
  /** Each server heartbeat of the connection (presence refresh). */
  readonly onHeartbeat: (conn: WsConnection) => void;
  /** Frames written to the socket: `n` of type `t` (metrics). */
  readonly onFrames: (t: FrameType, n: number) => void;
  /** A broadcast-stream `gap` frame is written to the socket (metrics: `pixiu_broadcast_gaps_total`); also counted by {@link onFrames}. */
  readonly onBroadcastGap?: () => void;
  /** A well-formed `ack` frame was handled, with what it did (metrics: `pixiu_acks_total`). */
  readonly onAck?: (outcome: AckOutcome) => void;
  /**
   * The connection closed (presence removal, metrics): with the code the server decided,
   * `by` 'server', or else the client's (or 1006 when the connection was lost), `by` 'client'.
   */
  readonly onClosed: (conn: WsConnection, code: number, by: CloseSide) => void;
  /**
   * Broadcasts: the node's fan-out, the stream to catch up from, and the node's thinning
   * of failed catch-ups' warnings (one throttle for all its connections: a Redis outage
   * fails the catch-up of every client reconnecting with `last_bseq`); absent: none.
   */
  readonly broadcast?: { readonly fanout: BroadcastFanout; readonly stream: BroadcastStream; readonly catchUpFailureLog: LogThrottle };
  /** Channels; absent: `sub`/`unsub` answer an error frame. */
  readonly channels?: ChannelDeps;
  /** The node's thinning of the info lines of server closes, shared by its connections (close-log.ts). */
  readonly closeLog: CloseLogThinning;
}

/** Who is on the connection. */
export interface ConnectionIdentity {
  readonly id: string;
  readonly user: string;
  readonly device: string;
  /** The JWT's `tags` (broadcast filters). */
  readonly tags: readonly string[];
  /** The JWT's `channels` patterns; undefined when it has no `channels` claim. */
  readonly channels: readonly string[] | undefined;
  /** Token expiry, ms since the epoch. */
  readonly expiresAtMs: number;
  /** Connected at, ms since the epoch. */
  readonly since: number;
}

/** What the handshake hands a WebSocket connection as it starts (WsConnection `start`), besides its resume request. */
export interface ConnectionStart {
  /** The client's `last_bseq`: broadcasts it missed follow `welcome`; undefined: none sent. */
  readonly lastBseq?: string | undefined;
  /** Called once `welcome` is out (the handshake's slot given back, handshake-slots.ts). */
  readonly onWelcome?: (() => void) | undefined;
  /** Reads the upgrade request's `reqId` and the client's address (src/api/client-ip.ts), for the debug `connection open` only: called only with debug on, not kept. */
  readonly client?: ClientOf | undefined;
}
