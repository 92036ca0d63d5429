/**
 * Ingest requests whose client left before their message was stored (src/ingest/abandoned.ts;
 * docs/api.md, "Messages"): the routes hand ingest {@link clientGoneOf} their request, and
 * a request it found abandoned is dropped unanswered ({@link dropAbandoned}), counted in
 * `pixiu_ingest_messages_total{outcome="abandoned"}` by the route.
 */
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ClientGone } from '../ingest/abandoned.js';
import type { IngestRoute } from './metric-labels.js';
import { requestFields } from './request-log.js';

/**
 * Whether the client of `req` has left: its connection was reset or destroyed, or the
 * client's FIN has been read (`readable` false once 'end' is emitted; Node's HTTP server
 * then ends the connection itself, so no answer could reach it anyway). A check of
 * state only, no turn of the event loop: it is asked after a wait (a Redis round trip,
 * the claim), during which a FIN that had arrived was read. Also what the gateway asks
 * of an upgrade (src/gateway/abandoned-handshakes.ts `clientGone`, which first lets the
 * loop read what follows the request).
 */
export function clientGoneOf(req: FastifyRequest): ClientGone {
  const socket = req.raw.socket;
  return () => socketGone(socket);
}

/**
 * Whether the peer of `socket` has left: reset or destroyed, or its FIN read (`readable`
 * false once 'end' is emitted), or nothing can be written to it any more. State only.
 * What an ingest request ({@link clientGoneOf}) and a WebSocket handshake
 * (src/gateway/abandoned-handshakes.ts `clientGone`) ask.
 */
export function socketGone(socket: Socket): boolean {
  return socket.destroyed || !socket.readable || !socket.writable;
}

/**
 * Ends a request whose client left before its message (or a batch item's) was stored:
 * logged at debug, no answer (the socket is destroyed; the handler returns the reply).
 * The caller counts its messages as `abandoned`.
 * @param messages how many of its messages were not stored for it (a batch's items)
 */
export function dropAbandoned(req: FastifyRequest, reply: FastifyReply, route: IngestRoute, messages = 1): FastifyReply {
  // Named as its failure lines are (request-log.ts); `ingest`, the route's metric label.
  req.log.debug({ ...requestFields(req), ingest: route, messages }, 'request abandoned by its client before its message was stored: not stored, not answered');
  reply.hijack();
  req.raw.socket.destroy();
  return reply;
}
