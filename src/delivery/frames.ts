/**
 * Server → client frames of the WebSocket protocol v1 (DESIGN.md §6). Each frame is
 * one JSON object with a `t` field. Defined here, beside the delivery state machine
 * that produces most of them, so the machine and the gateway share one vocabulary.
 */
import type { GapReason, MessageView } from './message-view.js';

/** First frame of every connection. */
export interface WelcomeFrame {
  t: 'welcome';
  /** This connection's id, 16 hex digits: the `conn` of its presence entry (the presence routes) and of the node's log lines about it. */
  conn: string;
  user: string;
  device: string;
  /** The inbox epoch; null when the user has no inbox yet. */
  epoch: string | null;
  /** Latest seq of the inbox (0: none). */
  seq: number;
  /** The first seq this connection will be sent (delivery starts here). */
  resume_from: number;
  /** Server heartbeat interval, seconds. */
  heartbeat: number;
  /**
   * Only when the client sent no `last_bseq` (and the node serves broadcasts): the
   * broadcast position it may keep until its first `bcast` — every broadcast after it
   * that matches its tags is sent on this connection, and reconnecting with
   * `last_bseq=<bseq>` gets those it did not get (docs/protocol.md "Broadcasts").
   * Set by the connection (DeliveryConnection `welcomeBseq`), not the machine.
   */
  bseq?: string;
}

/**
 * A message at its seq; `redelivered` when it was sent before on this connection;
 * `epoch`, the epoch its seq counts in, on the first one a connection gets after a
 * `welcome` or `reset` that said `epoch: null`.
 */
export type MsgFrame = { t: 'msg'; redelivered?: true; epoch?: string } & MessageView;

/** Seqs `from..to` (inclusive) cannot be delivered, all for one reason. */
export interface GapFrame {
  t: 'gap';
  from: number;
  to: number;
  /** Why (message-view.ts {@link GapReason}): `trimmed`, `expired` or `undeliverable`. */
  reason: GapReason;
  /** True when these seqs were sent on this connection before (as `msg` or `gap`) and are sent again by a redelivery round. */
  redelivered?: true;
  /** The epoch, when it stands in for a `msg` that would have carried it (one too large to send). */
  epoch?: string;
}

/** The inbox was recreated: forget the old last_seq; seqs restart under `epoch`. */
export interface ResetFrame {
  t: 'reset';
  epoch: string | null;
  /** Latest seq of the new inbox. */
  seq: number;
}

/** Answer to a client `ping`. */
export interface PongFrame {
  t: 'pong';
}

/** A client frame was refused; the connection stays open unless a close follows. */
export interface ErrorFrame {
  t: 'error';
  code: string;
  message: string;
  /**
   * The frame refused: `sub` and `unsub` name their `channel` (when it is a string
   * holding no lone surrogate: client-frames.ts `channelRef`),
   * an `ack` refused for its seq (above the last seq sent) names that `seq`, `refresh`,
   * a malformed `ack` and a malformed `ping` name only their `t`; malformed ones too (client-frames.ts
   * `FrameRefused`). Absent for a frame that is not JSON, not an object or of no known
   * `t`. (Errors also come in the order of the frames they answer:
   * src/gateway/frame-handler.ts.)
   */
  ref?: ErrorRef;
}

/** What an {@link ErrorFrame} refuses. */
export interface ErrorRef {
  t: 'sub' | 'unsub' | 'refresh' | 'ack' | 'ping';
  channel?: string;
  seq?: number;
}

/** Every frame the server sends on the inbox path. */
export type ServerFrame = WelcomeFrame | MsgFrame | GapFrame | ResetFrame | PongFrame | ErrorFrame;

/**
 * Every kind of frame the server writes (docs/protocol.md "Server → client"): the
 * delivery frames above, and the broadcast (`bcast`, and `gap`/`reset` of the broadcast
 * stream) and channel (`pub`, and `subscribed` answering a `sub`) frames written as
 * ready-made text. The label of `pixiu_ws_frames_sent_total`.
 */
export type FrameType = ServerFrame['t'] | 'bcast' | 'pub' | 'subscribed';
