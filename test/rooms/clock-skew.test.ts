/**
 * Room membership across nodes whose clocks differ (docs/api.md "Rooms": a room
 * message goes to "every member who had joined when it was first sent"; DESIGN.md §8).
 * Two `pixiu serve` nodes on one Redis, B's clock 400 ms ahead of A's (no NTP is
 * perfect; test/harness/clock-offset.mjs). Join slots and a room message's time are
 * both taken from Redis's clock, so the nodes agree on who had joined: on each node's
 * own clock, a member added through B was left out of a message sent right after
 * through A, and a member added after a message sent through B got its retry.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { cleanupList, type PixiuClient } from '../harness/pixiu-server.js';
import { skewedNodes } from '../harness/skewed-nodes.js';
import { addMembers } from './room-fixture.js';

const TOKEN = 'room-clock-skew-token-0123456789';
/** How far node B's clock runs ahead of node A's, ms. */
const SKEW_MS = 400;
const ROUNDS = 5;

/** Nodes A and B on a fresh Redis, B's clock {@link SKEW_MS} ahead, stopped when the test ends; their API clients. */
async function nodesApart(test: TestContext): Promise<{ a: PixiuClient; b: PixiuClient }> {
  const t = cleanupList();
  test.after(() => t.run());
  return skewedNodes(t, TOKEN, SKEW_MS);
}

test('a member added through the node whose clock runs ahead gets a room message sent right after through the other node', { timeout: 60_000 }, async (t) => {
  const { a, b } = await nodesApart(t);
  let missed = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const room = `skew-${i}`;
    await addMembers(a, room, ['first']);
    await addMembers(b, room, ['second']);
    const answer = await a.post('/v1/messages', { room, type: 'room.text', data: { i } });
    assert.equal(answer.status, 201, answer.text);
    if ((answer.body as { recipients: number }).recipients !== 2) missed += 1;
  }
  assert.equal(missed, 0, `${missed} of ${ROUNDS} room messages sent after "second" was added (answered 200) did not reach "second"`);
});

test('a member added after a room message, through the node whose clock is behind the sender\'s, does not get its retry', { timeout: 60_000 }, async (t) => {
  const { a, b } = await nodesApart(t);
  let leaked = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const room = `late-${i}`;
    await addMembers(a, room, ['first']);
    const body = { room, type: 'room.text', data: { i }, client_msg_id: `late-${i}` };
    const sent = await b.post('/v1/messages', body);
    assert.equal(sent.status, 201, sent.text);
    assert.equal((sent.body as { recipients: number }).recipients, 1, sent.text);
    await addMembers(a, room, [`late${i}`]);
    const retry = await b.post('/v1/messages', body);
    assert.equal(retry.status, 200, retry.text);
    const page = await a.get(`/v1/users/late${i}/messages`);
    assert.equal(page.status, 200, page.text);
    if ((page.body as { messages: unknown[] }).messages.length > 0) leaked += 1;
  }
  assert.equal(leaked, 0, `${leaked} of ${ROUNDS} members added after a room message got it from its retry`);
});
