/**
 * A 503 on a producer's write route while Redis is frozen does not say the work was not
 * done (docs/api.md "Errors"): the message may be stored and appended anyway, so its
 * answer says so and how to retry without a duplicate — in place of the shared "retry
 * later", which a producer without client_msg_id read as "nothing happened" and
 * published twice (chantest L1). A request without client_msg_id is told that a retry
 * may do it twice, not to retry "with the same client_msg_id" (it had none). The code
 * stays UNAVAILABLE, with Retry-After.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcessAlone, type HttpAnswer } from '../harness/pixiu-server.js';
import { expectError } from '../harness/checks.js';

/** The service's Redis command timeout, short so the frozen Redis is noticed fast. */
const COMMAND_TIMEOUT_MS = 500;

/** The timeout's own words (src/redis/client.ts), without their "retry later". */
const TIMED_OUT = 'Redis did not answer within the command timeout \\(Redis down or hung, or this node too busy to read its answer in time\\); ';

const MESSAGE = new RegExp(`^${TIMED_OUT}the message may have been stored and appended anyway: retry later with the same client_msg_id, `
  + 'which completes it without a duplicate$');

/** What a message without client_msg_id is told: a retry is no safe one. */
const MESSAGE_UNKEYED = new RegExp(`^${TIMED_OUT}the message may have been stored and appended anyway: this request had no client_msg_id, `
  + 'so a retry may store it a second time \\(send each message with a client_msg_id to retry it safely\\)$');

/** Asserts a 503 UNAVAILABLE with Retry-After whose message is `words`. */
function expectAdvice(answer: HttpAnswer, words: RegExp): void {
  expectError(answer, 503, 'UNAVAILABLE', words);
  assert.equal(answer.headers.get('retry-after'), '1');
}

test('while Redis is frozen, a 503 of POST /v1/messages (to users, to a room), a batch item, POST /v1/broadcast and a channel publication says it may have been done and to retry with the same client_msg_id, or, for one sent without, that a retry may do it twice', async (t) => {
  const { redis, server: { client } } = await startInProcessAlone(t, { redisCommandTimeoutMs: String(COMMAND_TIMEOUT_MS) });
  const members = await client.request('PUT', '/v1/rooms/frozen-room/members', { body: { users: ['ann', 'bob'] } });
  assert.equal(members.status, 200, members.text);
  redis.pause();
  try {
    expectAdvice(await client.post('/v1/messages', { to: 'ann', type: 't', data: 1, client_msg_id: 'frozen-user' }), MESSAGE);
    expectAdvice(await client.post('/v1/messages', { to: 'ann', type: 't', data: 2 }), MESSAGE_UNKEYED);
    expectAdvice(await client.post('/v1/messages', { room: 'frozen-room', type: 't', data: 3, client_msg_id: 'frozen-room' }), MESSAGE);

    const batch = await client.post('/v1/messages/batch', { messages: [{ to: 'bob', type: 't', data: 4, client_msg_id: 'frozen-item' }, { to: 'bob', type: 't', data: 4 }] });
    assert.equal(batch.status, 200, batch.text);
    assert.equal(batch.headers.get('retry-after'), '1');
    const [item, unkeyed] = (batch.body as { results: Array<{ status: number; error: { code: string; message: string } }> }).results;
    assert.equal(item?.status, 503, batch.text);
    assert.equal(item.error.code, 'UNAVAILABLE');
    assert.match(item.error.message, new RegExp(`^${TIMED_OUT}the message may have been stored and appended anyway: retry the item later with the same client_msg_id, `
      + 'which completes it without a duplicate$'));
    assert.equal(unkeyed?.status, 503, batch.text);
    assert.match(unkeyed.error.message, new RegExp(`^${TIMED_OUT}the message may have been stored and appended anyway: this item had no client_msg_id, `
      + 'so a retry may store it a second time \\(send each item with a client_msg_id to retry it safely\\)$'));

    expectAdvice(await client.post('/v1/broadcast', { type: 't', data: 5, client_msg_id: 'frozen-bcast' }), new RegExp(`^${TIMED_OUT}`
      + 'the broadcast may have been stored and published anyway: retry later with the same client_msg_id, '
      + 'which completes it without publishing it twice$'));
    expectAdvice(await client.post('/v1/broadcast', { type: 't', data: 5 }), new RegExp(`^${TIMED_OUT}`
      + 'the broadcast may have been stored and published anyway: this request had no client_msg_id, '
      + 'so a retry may publish it again \\(send each broadcast with a client_msg_id to retry it safely\\)$'));
    expectAdvice(await client.post('/v1/channels/live.frozen/publish', { type: 't', data: 6, client_msg_id: 'frozen-pub' }), new RegExp(`^${TIMED_OUT}`
      + 'the publication may have been published anyway: retry later with the same client_msg_id, '
      + 'which does not publish it twice on this channel$'));
    // Without client_msg_id: a retry is no safe one, and "the same client_msg_id" names none (a reviewer's nit).
    expectAdvice(await client.post('/v1/channels/live.frozen/publish', { type: 't', data: 6 }), new RegExp(`^${TIMED_OUT}`
      + 'the publication may have been published anyway: this request had no client_msg_id, '
      + 'so a retry may publish it again \\(send each publication with a client_msg_id to retry it safely\\)$'));

    // A route that writes no message keeps the shared words.
    expectError(await client.get('/v1/users/ann/messages'), 503, 'UNAVAILABLE', new RegExp(`^${TIMED_OUT.slice(0, -2)}; retry later$`));
  } finally {
    redis.resume();
  }
});
