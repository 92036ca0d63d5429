/**
 * A batch item whose `client_msg_id` an earlier item of the other kind (a room against
 * users) names is refused with CONFLICT when it is sent, so it is not counted against
 * the batch's recipient limit beforehand: counted, it pushed valid later items past the
 * limit (201 409 201 became 201 400 400). One admitted after an earlier 4xx freed its
 * key is counted then, and held to the limit like any other. Room items sharing a key
 * are looked at one after another, as docs/api.md says items sharing a key are handled:
 * a later one to a room without members is a retry of the earlier one (409), not 404;
 * one after an earlier item refused 404 (which stored nothing) is the key's first message.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { addMembers } from './room-fixture.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', batchMaxRecipients: '10' });
});

test('a cross-kind key conflict is not counted against the batch recipient limit (409, and later items still sent)', async () => {
  await addMembers(gw.client, 'big-room', Array.from({ length: 6 }, (_, i) => `br-${i}`));
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { to: ['u1', 'u2', 'u3', 'u4', 'u5', 'u6'], type: 't', data: 1, client_msg_id: 'k1' }, // 6 recipients
      { room: 'big-room', type: 't', data: 2, client_msg_id: 'k1' }, // conflicts: 409, 0 sent
      { to: ['v1', 'v2', 'v3'], type: 't', data: 3 }, // 6 + 3 = 9 <= 10
    ],
  });
  type Item = { status: number; error?: { code: string } };
  const results = (answer.body as { results: Item[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 409, 201], answer.text);
});

test('an item admitted after an earlier 4xx freed its key is still held to the recipient limit', async () => {
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { to: ['w1', 'w2', 'w3', 'w4', 'w5'], type: 't', data: 1 }, // 5
      { room: 'no-such-room-x', type: 't', data: 2, client_msg_id: 'k2' }, // 404, key freed
      { to: ['x1', 'x2', 'x3', 'x4', 'x5', 'x6'], type: 't', data: 3, client_msg_id: 'k2' }, // 5 + 6 > 10
      { to: ['y1'], type: 't', data: 4, client_msg_id: 'k3' }, // 6
    ],
  });
  type Item = { status: number; error?: { code: string } };
  const results = (answer.body as { results: Item[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 404, 400, 201], answer.text);
});

test('a room item reusing the key of an earlier room item, to a room without members, is 409 as the second of two requests is', async () => {
  await addMembers(gw.client, 'keyed-room', ['kr-1', 'kr-2']);
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { room: 'keyed-room', type: 't', data: 1, client_msg_id: 'k4' },
      { room: 'no-members-here', type: 't', data: 1, client_msg_id: 'k4' }, // the same key: another message under it
    ],
  });
  type Item = { status: number; error?: { code: string } };
  const results = (answer.body as { results: Item[] }).results;
  assert.deepEqual(results.map((r) => [r.status, r.error?.code]), [[201, undefined], [409, 'CONFLICT']], answer.text);
  const alone = await gw.client.post('/v1/messages', { room: 'no-members-here', type: 't', data: 1, client_msg_id: 'k4' });
  assert.equal(alone.status, 409, alone.text);
});

test('a room item refused 404 stored nothing, so the next room item naming its key is that key\'s first message (201)', async () => {
  await addMembers(gw.client, 'second-keyed-room', ['sk-1', 'sk-2']);
  const answer = await gw.client.post('/v1/messages/batch', {
    messages: [
      { room: 'nobody-in-here', type: 't', data: 1, client_msg_id: 'k5' }, // 404: the key is not taken
      { room: 'second-keyed-room', type: 't', data: 2, client_msg_id: 'k5' },
    ],
  });
  type Item = { status: number; error?: { code: string }; room?: string; recipients?: number };
  const results = (answer.body as { results: Item[] }).results;
  assert.deepEqual(results.map((r) => [r.status, r.error?.code]), [[404, 'NOT_FOUND'], [201, undefined]], answer.text);
  assert.deepEqual([results[1]?.room, results[1]?.recipients], ['second-keyed-room', 2]);
});
