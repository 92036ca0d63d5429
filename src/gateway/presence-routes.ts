/**
 * Presence and disconnect routes for producers and admins (DESIGN.md §7, API token):
 * `GET /v1/users/{uid}/presence`, `POST /v1/presence/query`,
 * `DELETE /v1/users/{uid}/connections[?device=]`.
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { answerObject, device, errorResponses, noQuery, tooLargeAnswer, userId } from '../api/schemas.js';
import type { PresenceEntry } from '../cluster/presence.js';
import type { GatewayDeps } from './gateway-deps.js';
import { CloseCode } from '../delivery/close-codes.js';

/** Most users one presence query may name. */
export const MAX_PRESENCE_QUERY = 1000;

/** One connection as the presence routes report it (docs/api.md); `since` in ms since the epoch. */
export interface ConnectionView {
  conn: string;
  device: string;
  node: string;
  since: number;
}

/** {@link ConnectionView} in a response schema. */
const connectionView = answerObject({
  conn: { type: 'string', description: 'the connection id' },
  device: { type: 'string' },
  node: { type: 'string', description: 'the node holding it' },
  since: { type: 'integer', description: 'when it was opened, ms since the epoch' },
}, ['conn', 'device', 'node', 'since']);

const connectionList = { type: 'array', items: connectionView } as const;

/** The presence of one user in `POST /v1/presence/query`'s answer. */
const presenceSummary = answerObject({
  online: { type: 'boolean' },
  devices: { type: 'array', items: { type: 'string' }, description: 'the devices connected, sorted, each once' },
  connections: connectionList,
}, ['online', 'devices', 'connections']);

function view(e: PresenceEntry): ConnectionView {
  return { conn: e.conn, device: e.device, node: e.node, since: e.since };
}

/** Registers the presence routes (call inside the API-token scope). */
export function presenceRoutes(app: FastifyInstance, deps: GatewayDeps): void {
  const uidParams = { type: 'object', properties: { uid: userId }, required: ['uid'] } as const;

  app.get<{ Params: { uid: string } }>('/v1/users/:uid/presence', {
    schema: {
      summary: 'Is a user online, and on which devices',
      operationId: 'getPresence',
      tags: ['presence'],
      params: uidParams,
      querystring: noQuery,
      response: {
        200: answerObject({ user: { type: 'string' }, online: { type: 'boolean' }, connections: connectionList }, ['user', 'online', 'connections'], 'The user\'s connections on every node'),
        ...errorResponses,
      },
    },
  }, async (req) => {
    const entries = await deps.presence.list(req.params.uid);
    return { user: req.params.uid, online: entries.length > 0, connections: entries.map(view) };
  });

  app.post<{ Body: { users: string[] } }>('/v1/presence/query', {
    schema: {
      summary: 'Presence of up to 1,000 users',
      operationId: 'queryPresence',
      tags: ['presence'],
      querystring: noQuery,
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['users'],
        properties: { users: { type: 'array', minItems: 1, maxItems: MAX_PRESENCE_QUERY, items: userId } },
      },
      response: {
        200: answerObject({ users: { type: 'object', additionalProperties: presenceSummary } }, ['users'], 'Each user named once, keyed by user id'),
        413: tooLargeAnswer(),
        ...errorResponses,
      },
    },
  }, async (req) => {
    const users = [...new Set(req.body.users)];
    const lists = await Promise.all(users.map((u) => deps.presence.list(u)));
    // DESIGN.md §7 promises this route what the single-user one answers: the
    // connections with device and node (`devices` is the short summary beside them).
    // A map keyed by user ids with no prototype: `__proto__` is a valid user id, and on a
    // plain object assigning it would set the prototype instead of adding the entry.
    const out: Record<string, { online: boolean; devices: string[]; connections: ConnectionView[] }> = Object.create(null);
    users.forEach((u, i) => {
      const entries = lists[i] ?? [];
      out[u] = { online: entries.length > 0, devices: [...new Set(entries.map((e) => e.device))].sort(), connections: entries.map(view) };
    });
    return { users: out };
  });

  app.delete<{ Params: { uid: string }; Querystring: { device?: string } }>('/v1/users/:uid/connections', {
    schema: {
      summary: 'Disconnect a user (all devices, or one)',
      operationId: 'disconnectUser',
      description: 'Closes the user\'s connections on every node with code 1008. The answer counts the connections asked to close; their presence entries are removed at once, freeing their slots of the connection limit even when the node holding them has crashed.',
      tags: ['presence'],
      params: uidParams,
      querystring: { type: 'object', additionalProperties: false, properties: { device } },
      response: {
        200: answerObject({
          user: { type: 'string' },
          closed: { type: 'integer', description: 'how many connections were asked to close' },
        }, ['user', 'closed'], 'The connections asked to close'),
        ...errorResponses,
      },
    },
  }, async (req) => {
    const closed = await deps.kickUser(req.params.uid, req.query.device, CloseCode.policy, 'disconnected by the service');
    return { user: req.params.uid, closed };
  });
}
