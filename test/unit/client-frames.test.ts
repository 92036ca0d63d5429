/**
 * Client → server frames (src/gateway/client-frames.ts, DESIGN.md §6): what parses,
 * and that everything else is a PixiuError INVALID_REQUEST whose message names the
 * problem (it goes back to the client in an `error` frame).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maxHeaderSize } from 'node:http';
import { parseClientFrame, refreshFrameToken } from '../../src/gateway/client-frames.js';
import { isPixiuError } from '../../src/errors.js';

/** Asserts that `text` is refused with INVALID_REQUEST and a message matching `message`. */
function refused(text: string, message: RegExp): void {
  assert.throws(() => parseClientFrame(text), (err: unknown) => {
    assert.ok(isPixiuError(err, 'INVALID_REQUEST'), `${text}: ${String(err)}`);
    assert.match(err.message, message, text);
    return true;
  });
}

test('valid frames parse to their typed form', () => {
  assert.deepEqual(parseClientFrame('{"t":"ack","seq":0}'), { t: 'ack', seq: 0 });
  assert.deepEqual(parseClientFrame('{"t":"ack","seq":42}'), { t: 'ack', seq: 42 });
  assert.deepEqual(parseClientFrame(`{"t":"ack","seq":${Number.MAX_SAFE_INTEGER}}`), { t: 'ack', seq: Number.MAX_SAFE_INTEGER });
  assert.deepEqual(parseClientFrame('{"t":"ping"}'), { t: 'ping' });
  assert.deepEqual(parseClientFrame(' { "t" : "ping" } '), { t: 'ping' });
  assert.deepEqual(parseClientFrame('{"t":"refresh","token":"a.b.c"}'), { t: 'refresh', token: 'a.b.c' });
  assert.deepEqual(parseClientFrame('{"t":"sub","channel":"news"}'), { t: 'sub', channel: 'news' });
  assert.deepEqual(parseClientFrame('{"t":"sub","channel":"news","since":"12-0"}'), { t: 'sub', channel: 'news', since: '12-0' });
  assert.deepEqual(parseClientFrame('{"t":"sub","channel":"news","since":null}'), { t: 'sub', channel: 'news' }, 'null: none, as an ack\'s epoch');
  assert.deepEqual(parseClientFrame('{"t":"unsub","channel":"news"}'), { t: 'unsub', channel: 'news' });
});

test('a frame that is not JSON is refused', () => {
  for (const text of ['', 'ack 3', '{"t":"ack","seq":3', "{'t':'ping'}", '{"t":"ping"}{"t":"ping"}']) {
    refused(text, /not valid JSON/);
  }
});

test('JSON that is not an object is refused', () => {
  for (const text of ['[]', '[{"t":"ping"}]', 'null', '"ping"', '3', 'true']) {
    refused(text, /must be a JSON object with a "t" field/);
  }
});

test('an unknown or missing t is refused, naming the types that exist', () => {
  refused('{"t":"subscribe","channel":"x"}', /unknown frame type "subscribe"; expected ack, ping, refresh, sub or unsub/);
  refused('{"t":"ACK","seq":1}', /unknown frame type "ACK"/);
  refused('{"t":"__proto__"}', /unknown frame type/);
  refused('{"t":"toString"}', /unknown frame type/);
  refused('{"t":7}', /frame needs "t": one of ack, ping, refresh, sub or unsub/);
  refused('{"t":null}', /frame needs "t"/);
  refused('{"seq":1}', /frame needs "t"/);
  refused('{}', /frame needs "t"/);
  // Cut to 40 characters before it is quoted (src/text-cut.ts quotedText), never inside an escape.
  refused(`{"t":"${'x'.repeat(5_000)}"}`, /^unknown frame type "x{40}"…; expected/);
  refused(`{"t":"${'\\n'.repeat(30)}"}`, /^unknown frame type "(\\n){30}"; expected/);
});

test('ack needs seq: a non-negative safe integer', () => {
  for (const seq of ['"3"', '-1', '1.5', '1e300', String(2 ** 53), '9007199254740993', 'null', 'true', '[3]', '{}']) {
    refused(`{"t":"ack","seq":${seq}}`, /^ack frame needs seq: an integer from 0 to 9007199254740991$/);
  }
  refused('{"t":"ack"}', /ack frame needs seq/);
});

test('unknown fields are refused, named in the message', () => {
  refused('{"t":"ack","seq":1,"device":"x"}', /ack frame has an unknown field "device"/);
  refused('{"t":"ping","x":1}', /ping frame has an unknown field "x"/);
  refused('{"t":"refresh","token":"a","sub":"u2"}', /refresh frame has an unknown field "sub"/);
  refused('{"t":"unsub","channel":"c","since":"1-0"}', /unsub frame has an unknown field "since"/);
  refused('{"t":"ping","__proto__":{"seq":1}}', /unknown field "__proto__"/);
  // Quoted and escaped (src/text-cut.ts quotedText): a C1 control (CSI to a terminal) as its escape, a long name cut.
  refused('{"t":"ping","\u009b2J":1}', /^ping frame has an unknown field "\\u009b2J"$/);
  refused(`{"t":"ping","${'k'.repeat(100)}":1}`, /^ping frame has an unknown field "k{40}"…$/);
});

test('string fields must be non-empty and bounded', () => {
  refused('{"t":"refresh"}', /refresh frame needs token: the new JWT, a non-empty string/);
  refused('{"t":"refresh","token":""}', /needs token/);
  refused('{"t":"refresh","token":42}', /needs token/);
  // Not "1-8192 characters" when none is given: the frame limit (4 KiB) is lower.
  refused(`{"t":"refresh","token":"${'a'.repeat(maxHeaderSize + 1)}"}`, new RegExp(`refresh frame's token is over ${maxHeaderSize} characters`));
  refused('{"t":"sub"}', /sub frame needs channel: a string of 1-128 characters/);
  // The limit is the channel name's (docs/protocol.md): 128 passes the frame, 129 does not.
  assert.deepEqual(parseClientFrame(`{"t":"sub","channel":"${'c'.repeat(128)}"}`), { t: 'sub', channel: 'c'.repeat(128) });
  refused(`{"t":"sub","channel":"${'c'.repeat(129)}"}`, /sub frame needs channel: a string of 1-128 characters/);
  refused(`{"t":"unsub","channel":"${'c'.repeat(129)}"}`, /unsub frame needs channel: a string of 1-128 characters/);
  refused('{"t":"sub","channel":"c","since":5}', /needs since/);
  refused('{"t":"unsub","channel":""}', /unsub frame needs channel/);
});

test('ack\'s epoch, when given, is a string of 1-64 characters, or null (none)', () => {
  const e64 = 'e'.repeat(64);
  assert.deepEqual(parseClientFrame(`{"t":"ack","seq":3,"epoch":"${e64}"}`), { t: 'ack', seq: 3, epoch: e64 });
  assert.deepEqual(parseClientFrame('{"t":"ack","seq":3,"epoch":null}'), { t: 'ack', seq: 3 });
  refused(`{"t":"ack","seq":3,"epoch":"${e64}e"}`, /epoch.*1-64 characters/);
  refused('{"t":"ack","seq":3,"epoch":""}', /epoch.*1-64 characters/);
  refused('{"t":"ack","seq":3,"epoch":7}', /epoch.*1-64 characters/);
});

test('refreshFrameToken: the token of a well-formed refresh (verified on arrival), from a Buffer or a string; undefined for any other frame', () => {
  assert.equal(refreshFrameToken(Buffer.from('{"t":"refresh","token":"a.b.c"}')), 'a.b.c');
  assert.equal(refreshFrameToken('{ "token" : "x.y.z", "t" : "refresh" }'), 'x.y.z');
  for (const text of [
    '{"t":"ping"}', '{"t":"sub","channel":"refresh"}', '{"t":"refresh"}', '{"t":"refresh","token":""}',
    '{"t":"refresh","token":"a","extra":1}', '"refresh"', 'not json',
  ]) {
    assert.equal(refreshFrameToken(Buffer.from(text)), undefined, text);
    assert.equal(refreshFrameToken(text), undefined, text);
  }
});
