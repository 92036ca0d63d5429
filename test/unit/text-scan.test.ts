/**
 * The exact scan for lone surrogates in a JSON body's text (src/api/lone-surrogates.ts
 * `holdsLoneSurrogate`: it gates the walk that names where one is, so a miss lets one
 * through and a false alarm costs a walk), and cutting text without splitting a pair
 * (src/text-cut.ts: error answers must stay readable by strict JSON decoders), and
 * quoting text Pixiu did not write for one-line messages (`quotedText`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { holdsLoneSurrogate, loneSurrogateFault } from '../../src/api/lone-surrogates.js';
import { cutText, quotedText, wholeSlice } from '../../src/text-cut.js';

test('holdsLoneSurrogate finds exactly the lone surrogate escapes of a JSON text', () => {
  const anyLone = (v: unknown): boolean => (typeof v === 'string' ? /\p{Cs}/u.test(v)
    : typeof v === 'object' && v !== null ? Object.entries(v).some(([k, x]) => /\p{Cs}/u.test(k) || anyLone(x)) : false);
  const lone = (json: string): boolean => {
    // The scan must agree with what the parser makes of the text.
    assert.equal(holdsLoneSurrogate(json), anyLone(JSON.parse(json)), `the scan disagrees with the parse of ${json}`);
    return holdsLoneSurrogate(json);
  };
  assert.equal(lone('{"a":"plain","b":"\\n\\t\\"\\\\"}'), false);
  assert.equal(lone('{"e":"\\ud83d\\ude00"}'), false, 'a pair written as two escapes');
  assert.equal(lone('{"e":"\\uD83D\\uDE00 and \\u00e9"}'), false, 'upper-case hex; a BMP escape');
  assert.equal(lone('{"e":"😀"}'), false, 'a pair written as UTF-8');
  assert.equal(lone('{"h":"\\ud83d"}'), true, 'a high one at the end of its string');
  assert.equal(lone('{"h":"\\ud83d x"}'), true, 'a high one followed by another character');
  assert.equal(lone('{"h":"\\ud83d\\u0041"}'), true, 'a high one followed by an escape that is no low one');
  assert.equal(lone('{"h":"\\ud83d\\ud83d\\ude00"}'), true, 'two highs, then a low: the first is lone');
  assert.equal(lone('{"l":"\\ude00"}'), true, 'a low one alone');
  assert.equal(lone('{"\\udfff":1}'), true, 'in a key');
  assert.equal(lone('{"s":"\\\\ud83d"}'), false, 'an escaped backslash then "ud83d": text, not an escape');
  assert.equal(lone('{"s":"\\\\\\ud83d"}'), true, 'an escaped backslash, then an escape');
  assert.equal(lone('["\\\\","\\ud800"]'), true);
});

test('loneSurrogateFault names where, cutting a long path without splitting an emoji in a key', () => {
  assert.equal(loneSurrogateFault({ ok: '😀' }), undefined);
  const key = `${'x'.repeat(198)}😀`;
  const fault = loneSurrogateFault({ [key]: { v: '\ud800' } });
  assert.ok(fault !== undefined);
  assert.ok(!/\p{Cs}/u.test(fault), `the message holds a lone surrogate itself: ${fault}`);
  assert.ok(fault.startsWith(`/${'x'.repeat(198)}… holds a lone surrogate (\\ud800)`), fault);
});

test('cutText and wholeSlice never split a surrogate pair', () => {
  assert.equal(cutText('abc', 3), 'abc');
  assert.equal(cutText('abcd', 3), 'abc…');
  assert.equal(cutText('ab😀c', 3), 'ab…', 'the pair at the cut is left out whole');
  assert.equal(cutText('ab😀c', 4), 'ab😀…');
  assert.equal(wholeSlice('😀ab😀', 1, 5), 'ab', 'both ends moved inwards');
  assert.equal(wholeSlice('😀ab😀', 0, 6), '😀ab😀');
});

test('quotedText quotes, escapes all but printable ASCII, and cuts outside the quotes', () => {
  assert.equal(quotedText('http://localhost:3000', 100), '"http://localhost:3000"');
  // C0 as JSON writes them; DEL, C1 (CSI), Latin-1 and the rest as \uXXXX: one line, no terminal control.
  assert.equal(quotedText('a\nb\x1b[31m\x7f\u009b\u00e9"\\', 100), '"a\\nb\\u001b[31m\\u007f\\u009b\\u00e9\\"\\\\"');
  assert.equal(quotedText('x'.repeat(50), 40), `"${'x'.repeat(40)}"…`);
  // Never half a pair: the emoji that the cut would split is left out whole.
  assert.equal(quotedText(`${'x'.repeat(39)}😀`, 40), `"${'x'.repeat(39)}"…`);
  assert.equal(quotedText(`${'x'.repeat(38)}😀`, 40), `"${'x'.repeat(38)}\\ud83d\\ude00"`);
  // Other values: their JSON, cut to max.
  assert.equal(quotedText(1.5, 40), '1.5');
  assert.equal(quotedText(null, 40), 'null');
  assert.equal(quotedText(undefined, 40), 'undefined');
  assert.equal(quotedText({ a: 'é' }, 40), '{"a":"\\u00e9"}');
  assert.equal(quotedText(['y'.repeat(60)], 10), '["yyyyyyyy…');
  // bare: plain names as they are, any other quoted.
  assert.equal(quotedText('12', 255, { bare: true }), '12');
  assert.equal(quotedText('old\tparts', 255, { bare: true }), '"old\\tparts"');
  assert.equal(quotedText('p\u009b', 255, { bare: true }), '"p\\u009b"');
  assert.equal(quotedText('z'.repeat(6), 4, { bare: true }), '"zzzz"…');
});
