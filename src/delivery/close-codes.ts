/**
 * WebSocket close codes (DESIGN.md §6; 1000–1009 from RFC 6455 §7.4.1). One table for
 * the delivery machine, which decides 4008, and the gateway, which sends them all.
 */
export const CloseCode = Object.freeze({
  normal: 1000,
  goingAway: 1001,
  policy: 1008,
  tooBig: 1009,
  tokenExpired: 4001,
  replaced: 4002,
  protocolAbuse: 4003,
  ackTimeout: 4008,
  slowConsumer: 4009,
} as const);
