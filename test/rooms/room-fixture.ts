/**
 * What the room tests share (DESIGN.md §7, §8): membership calls over the real HTTP
 * API, a room message posted and its answer checked, and the `msg` frame of a room
 * message read from a {@link TestClient} with every field asserted.
 */
import assert from 'node:assert/strict';
import type { HttpAnswer, PixiuClient } from '../harness/pixiu-server.js';
import type { Frame, TestClient } from '../harness/ws-client.js';

/** `PUT /v1/rooms/{room}/members {users}`, the room id path-encoded. */
export function putMembers(client: PixiuClient, room: string, users: readonly string[]): Promise<HttpAnswer> {
  return client.request('PUT', membersPath(room), { body: { users } });
}

/** `DELETE /v1/rooms/{room}/members {users}`. */
export function deleteMembers(client: PixiuClient, room: string, users: readonly string[]): Promise<HttpAnswer> {
  return client.request('DELETE', membersPath(room), { body: { users } });
}

/** `/v1/rooms/{room}/members` with the room id encoded as one path segment. */
export function membersPath(room: string): string {
  return `/v1/rooms/${encodeURIComponent(room)}/members`;
}

/** Adds members and asserts the call succeeded with `added` new ones. */
export async function addMembers(client: PixiuClient, room: string, users: readonly string[], added = users.length): Promise<void> {
  const answer = await putMembers(client, room, users);
  assert.equal(answer.status, 200, answer.text);
  assert.equal((answer.body as { added: number }).added, added, answer.text);
}

/** What `POST /v1/messages {room…}` answers. */
export interface RoomAnswer {
  id: string;
  room: string;
  recipients: number;
  duplicate: boolean;
}

/**
 * Posts a room message and asserts its status (201 created, 200 duplicate) and how
 * many members it went to.
 */
export async function postRoom(
  client: PixiuClient, body: Record<string, unknown>, expect: { status: number; recipients: number },
): Promise<RoomAnswer> {
  const answer = await client.post('/v1/messages', { type: 'room.text', data: { text: 'hello room' }, ...body });
  assert.equal(answer.status, expect.status, answer.text);
  const r = answer.body as RoomAnswer;
  assert.equal(r.room, body.room);
  assert.equal(r.recipients, expect.recipients, answer.text);
  assert.equal(r.duplicate, expect.status === 200, answer.text);
  return r;
}

/** Reads the next frame and asserts it is exactly the room message `id` at `seq`. */
export async function expectRoomMsg(
  client: TestClient, want: { seq: number; id: string; room: string; type?: string; from?: string; data?: unknown },
): Promise<Frame> {
  const f = await client.next();
  assert.equal(typeof f.ts, 'number', JSON.stringify(f));
  // The first msg of a connection welcomed before the member had an inbox names its epoch.
  assert.ok(f.epoch === undefined || (typeof f.epoch === 'string' && f.epoch.length === 12), JSON.stringify(f));
  assert.deepEqual(f, {
    ...(f.epoch !== undefined ? { epoch: f.epoch } : {}),
    t: 'msg',
    seq: want.seq,
    id: want.id,
    type: want.type ?? 'room.text',
    ...(want.from !== undefined ? { from: want.from } : {}),
    room: want.room,
    ts: f.ts,
    data: want.data ?? { text: 'hello room' },
  });
  return f;
}
