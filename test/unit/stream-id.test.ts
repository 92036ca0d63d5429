/**
 * Stream entry IDs at their edges (src/streams/stream-id.ts): each part an integer of
 * at most 2^64 − 1, as Redis takes them; Redis's refusals of an ID are told apart from
 * outages.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { unavailable } from '../../src/errors.js';
import { compareStreamIds, isInvalidStreamIdReply, isStreamId, MAX_STREAM_ID, precedingStreamId } from '../../src/streams/stream-id.js';

test('a stream id is <ms>-<seq>, each part at most 2^64-1', () => {
  for (const ok of ['0-0', '1700000000000-5', '18446744073709551615-18446744073709551615', '18446744073709551615-0', '0-18446744073709551615', '00000000000000000001-0']) {
    assert.equal(isStreamId(ok), true, ok);
  }
  for (const bad of ['99999999999999999999-0', '18446744073709551616-0', '0-18446744073709551616', '18446744073709551616-18446744073709551616', '1', '1-', '-1', '1-2-3', ' 1-2', '1-2 ', 'a-1', '123456789012345678901-0']) {
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

test('the largest stream id is both parts 2^64-1, and no valid id is above it', () => {
  assert.equal(isStreamId(MAX_STREAM_ID), true);
  assert.equal(compareStreamIds(MAX_STREAM_ID, '18446744073709551615-18446744073709551615'), 0);
  assert.equal(compareStreamIds('018446744073709551615-18446744073709551615', MAX_STREAM_ID), 0);
  for (const below of ['18446744073709551615-18446744073709551614', '18446744073709551614-18446744073709551615', '0-0']) {
    assert.ok(compareStreamIds(below, MAX_STREAM_ID) < 0, below);
  }
});

test('the id just before another: the sequence part less one, else the millisecond before with the largest sequence; 0-0 has none', () => {
  assert.equal(precedingStreamId('5-3'), '5-2');
  assert.equal(precedingStreamId('5-0'), '4-18446744073709551615');
  assert.equal(precedingStreamId('0-1'), '0-0');
  assert.equal(precedingStreamId('0-0'), undefined);
  assert.equal(precedingStreamId('18446744073709551615-0'), '18446744073709551614-18446744073709551615');
  assert.equal(precedingStreamId('9007199254740993-9007199254740993'), '9007199254740993-9007199254740992', 'past 2^53, exactly');
});
