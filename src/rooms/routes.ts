/**
 * Room membership routes (DESIGN.md §7, §8), behind the API token:
 * `PUT /v1/rooms/{room}/members {users}` adds, `DELETE` removes, `GET` lists (paged).
 * Room ids follow the user-id rule. A room exists while it has members: GET, DELETE
 * and room messages answer 404 for a room without any.
 */
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { answerObject, errorResponses, noQuery, notFoundAnswer, tooLargeAnswer, userId } from '../api/schemas.js';
import { MEMBER_CURSOR_PATTERN, roomNotFound, type Rooms } from './membership.js';

/** Most users one membership call may name. */
export const MAX_MEMBERS_PER_CALL = 1000;

const roomParams = { type: 'object', properties: { room: { ...userId, description: 'a room id (the user-id rule)' } }, required: ['room'] } as const;
const usersBody = {
  type: 'object',
  additionalProperties: false,
  required: ['users'],
  properties: { users: { type: 'array', minItems: 1, maxItems: MAX_MEMBERS_PER_CALL, items: userId } },
} as const;

/**
 * The answer of a membership change: the room, how many users `count` names (`added`
 * or `removed`), and the room's size after it.
 */
function membershipChange(count: 'added' | 'removed', description: string) {
  return answerObject({
    room: { type: 'string' },
    [count]: { type: 'integer', description: `users ${count} by this call (those already ${count === 'added' ? 'members' : 'absent'} are not counted)` },
    size: { type: 'integer', description: 'members in the room now' },
  }, ['room', count, 'size'], description);
}

/** Registers the membership routes (call inside the API-token scope). */
export function roomRoutes(app: FastifyInstance, rooms: Rooms): void {
  app.put<{ Params: { room: string }; Body: { users: string[] } }>('/v1/rooms/:room/members', {
    schema: {
      summary: 'Add members to a room (creating it)',
      operationId: 'addRoomMembers',
      description: `All or none: a call that would take the room over its size cap (default 10,000) adds nobody; use a channel for bigger audiences. Up to ${MAX_MEMBERS_PER_CALL} users per call. Members added later do not get earlier room messages.`,
      tags: ['rooms'],
      params: roomParams,
      querystring: noQuery,
      body: usersBody,
      response: { 200: membershipChange('added', 'Added (all of them)'), 413: tooLargeAnswer(), ...errorResponses },
    },
  }, async (req) => {
    const r = await rooms.add(req.params.room, req.body.users);
    return { room: req.params.room, added: r.added, size: r.size };
  });

  app.delete<{ Params: { room: string }; Body: { users: string[] } }>('/v1/rooms/:room/members', {
    schema: {
      summary: 'Remove members from a room',
      operationId: 'removeRoomMembers',
      description: 'Removed members get no new room messages. Absent users are ignored; a room without members is 404.',
      tags: ['rooms'],
      params: roomParams,
      querystring: noQuery,
      body: usersBody,
      response: { 200: membershipChange('removed', 'Removed'), 404: notFoundAnswer('the room has no members, and none was removed (a room exists while it has members)'), 413: tooLargeAnswer(), ...errorResponses },
    },
  }, async (req) => {
    const r = await rooms.remove(req.params.room, req.body.users);
    if (r.removed === 0 && r.size === 0) throw roomNotFound(req.params.room);
    return { room: req.params.room, removed: r.removed, size: r.size };
  });

  app.get<{ Params: { room: string }; Querystring: { cursor?: string; limit: number } }>('/v1/rooms/:room/members', {
    schema: {
      summary: 'List a room\'s members, in join order, paged',
      operationId: 'listRoomMembers',
      description: 'Follow next_cursor (null on the last page). Members who leave or join between pages make no page skip or repeat anyone; newcomers come last.',
      tags: ['rooms'],
      params: roomParams,
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: {
          cursor: { type: 'string', pattern: MEMBER_CURSOR_PATTERN, description: 'next_cursor of the previous page; absent: from the first member' },
          limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100, description: 'most members on the page, 1 – 1,000; default 100' },
        },
      },
      response: {
        200: answerObject({
          room: { type: 'string' },
          size: { type: 'integer', description: 'members in the room' },
          members: { type: 'array', items: { type: 'string' }, description: 'user ids, in join order' },
          next_cursor: { type: ['string', 'null'], description: 'cursor of the next page; null on the last page' },
        }, ['room', 'size', 'members', 'next_cursor'], 'One page of members, in join order'),
        404: notFoundAnswer('no such room: a room exists while it has members'),
        ...errorResponses,
      },
    },
  }, async (req) => {
    const page = await rooms.list(req.params.room, req.query.cursor, req.query.limit);
    if (page.size === 0) throw roomNotFound(req.params.room);
    return { room: req.params.room, size: page.size, members: page.members, next_cursor: page.nextCursor };
  });
}
