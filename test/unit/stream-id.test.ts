/**
 * Stream entry IDs at their edges (src/streams/stream-id.ts): each part an integer of
 * at most 2^64 − 1, as Redis takes them; Redis's refusals of an ID are told apart from
 * outages.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { unavailable } from '../../src/errors.js';
import { isInvalidStreamIdReply, isStreamId } from '../../src/streams/stream-id.js';

test('a stream id is <ms>-<seq>, each part at most 2^64-1', () => {
  for (const ok of ['0-0', '1700000000000-5', '18446744073709551615-18446744073709551615', '00000000000000000001-0']) {
    assert.equal(isStreamId(ok), true, ok);
  }
  for (const bad of ['99999999999999999999-0', '18446744073709551616-0', '0-18446744073709551616', '1', '1-', '-1', '1-2-3', ' 1-2', '1-2 ', 'a-1', '123456789012345678901-0']) {
    assert.equal(isStreamId(bad), false, bad);
  }
});

test("Redis's stream id refusals are recognised, also wrapped as UNAVAILABLE; other failures are not", () => {
  const reply = { name: 'ReplyError', message: 'ERR Invalid stream ID specified as stream command argument' };
  assert.equal(isInvalidStreamIdReply(reply), true);
  assert.equal(isInvalidStreamIdReply(unavailable('Redis is unavailable, retry later', reply)), true);
  assert.equal(isInvalidStreamIdReply(new Error('ERR invalid start ID for the interval')), true);
  assert.equal(isInvalidStreamIdReply(unavailable('Redis is unavailable, retry later', new Error('Connection is closed.'))), false);
  assert.equal(isInvalidStreamIdReply(undefined), false);
});
