/**
 * The `ref` of a refused client frame (src/gateway/client-frames.ts, docs/protocol.md,
 * the `error` frame): `{t, channel}` for a `sub` or `unsub` whose channel is a string,
 * `{t}` for one without, `{"t":"refresh"}` for a `refresh` whatever fields it carries,
 * `{t}` for an `ack` or a `ping`, and none for a frame of no known `t`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FrameRefused, parseClientFrame } from '../../src/gateway/client-frames.js';

/** The `ref` of the refusal of `text`. */
function refOf(text: string): unknown {
  try {
    parseClientFrame(text);
  } catch (err) {
    assert.ok(err instanceof FrameRefused, `${text}: ${String(err)}`);
    return err.ref;
  }
  assert.fail(`${text} was not refused`);
}

test('a refused sub or unsub names its channel when it is a string', () => {
  assert.deepEqual(refOf('{"t":"sub","channel":"news","since":5}'), { t: 'sub', channel: 'news' });
  assert.deepEqual(refOf('{"t":"unsub","channel":"news","x":1}'), { t: 'unsub', channel: 'news' });
  assert.deepEqual(refOf('{"t":"sub","channel":7}'), { t: 'sub' });
  assert.deepEqual(refOf('{"t":"unsub"}'), { t: 'unsub' });
});

test('a refused refresh is named {"t":"refresh"} only, even when it carries a channel field', () => {
  assert.deepEqual(refOf('{"t":"refresh"}'), { t: 'refresh' });
  assert.deepEqual(refOf('{"t":"refresh","token":"a","channel":"news"}'), { t: 'refresh' });
});

test('a malformed ack or ping names only its t; a frame of no known t carries no ref', () => {
  assert.deepEqual(refOf('{"t":"ack","seq":-1}'), { t: 'ack' });
  assert.deepEqual(refOf('{"t":"ack","seq":3,"extra":1}'), { t: 'ack' });
  // The walk14 tester's F5: a ping with a field of its own had no ref.
  assert.deepEqual(refOf('{"t":"ping","x":1}'), { t: 'ping' });
  assert.deepEqual(refOf('{"t":"ping","channel":"news"}'), { t: 'ping' });
  assert.equal(refOf('{"t":"nope","channel":"news"}'), undefined);
  assert.equal(refOf('not json'), undefined);
});
