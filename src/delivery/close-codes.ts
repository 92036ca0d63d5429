/**
 * WebSocket close codes (DESIGN.md §6; 1000–1009 from RFC 6455 §7.4.1). One table for
 * the delivery machine, which decides 4008, and the gateway, which sends them all.
 */
export const CloseCode = Object.freeze({
  normal: 1000,
  goingAway: 1001,
  policy: 1008,
  tooBig: 1009,
  /** No close frame (RFC 6455 §7.4.1): what an idle connection the server cuts is counted as. */
  abnormal: 1006,
  tokenExpired: 4001,
  replaced: 4002,
  protocolAbuse: 4003,
  ackTimeout: 4008,
  slowConsumer: 4009,
} as const);

/** Who chose a close's code: the server (counted as it decided, whatever the client saw), or the client (or the network: 1006). */
export type CloseSide = 'server' | 'client';

/** Codes the server sends or `ws` reports (RFC 6455 §7.4.1, 1000–1015), and Pixiu's own (DESIGN.md §6). */
const LABELLED_CLOSE_CODES: ReadonlySet<number> = new Set([...Array.from({ length: 16 }, (_, i) => 1000 + i), ...Object.values(CloseCode)]);

/**
 * The `code` label of `pixiu_ws_closes_total`: the code itself when it is one of
 * {@link LABELLED_CLOSE_CODES}, else `other` — a client closes with any code of
 * 3000–4999 it likes, and each would be a series of its own for the life of the process.
 */
export function closeCodeLabel(code: number): string {
  return LABELLED_CLOSE_CODES.has(code) ? String(code) : 'other';
}
