/**
 * What a body that is not JSON is told (src/api/json-error.ts): the parser's cause and
 * where it stopped, with a short excerpt, never the whole body (an integrator newcomer
 * could not tell where a 7 MB batch broke from "the body is not valid JSON").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { notJsonMessage } from '../../src/api/json-error.js';

/** The message for `text`, which must not parse. */
function told(text: string): string {
  try {
    JSON.parse(text);
  } catch (err) {
    return notJsonMessage(text, err);
  }
  return assert.fail(`${text} parsed`);
}

/** The excerpt as the message quotes it: a JSON string. */
const near = (excerpt: string): string => `(near ${JSON.stringify(excerpt)})`;

test('a fault at a position is named with the position and at most 16 characters each side', () => {
  assert.equal(told('{"to":"g","type":"t","data":1} x'),
    `the body is not valid JSON: unexpected non-whitespace character after JSON at byte 31 ${near('…":"t","data":1} x')}`);
  assert.equal(told('{"a":1}{}'), `the body is not valid JSON: unexpected non-whitespace character after JSON at byte 7 ${near('{"a":1}{}')}`);
  assert.equal(told("{'to':'g'}"), `the body is not valid JSON: expected property name or '}' at byte 1 ${near("{'to':'g'}")}`);
  const long = `{"data":"${'x'.repeat(1000)}" "y":1}\n`;
  assert.equal(told(long), `the body is not valid JSON: expected ',' or '}' after property value at byte 1011 ${near(`…${'x'.repeat(14)}" "y":1}\n`)}`);
});

test('the position is the byte offset in the UTF-8 body, and the excerpt never splits a surrogate pair', () => {
  // 'é' is two bytes, '😀' four (two UTF-16 units): the fault is at byte 7 + 2 + 4 + 1.
  assert.match(told('{"a":"é😀" x}'), /at byte 14 /);
  // The excerpt's start would fall between the two halves of the emoji: it starts after it.
  const text = `{"k":"${'😀'.repeat(20)}"  x}`;
  const message = told(text);
  assert.ok(!/\p{Cs}/u.test(message), `a lone surrogate in ${message}`);
  assert.ok(JSON.parse(/\(near (.*)\)$/.exec(message)?.[1] ?? '""').startsWith('…😀'), message);
});

test('an unexpected token, which V8 places nowhere, is named from where it starts, with its byte and the excerpt; a body cut short says so', () => {
  assert.equal(told(`{"data":"${'s'.repeat(200)}","n":NaN}`), `the body is not valid JSON: unexpected token 'NaN' at byte 215 ${near('…ssssssssss","n":NaN}')}`);
  // A form body: V8 reads 't' as the start of true and names the 'o'.
  assert.equal(told('to=bob'), `the body is not valid JSON: unexpected token 'to' at byte 0 ${near('to=bob')}`);
  assert.equal(told('hello'), `the body is not valid JSON: unexpected token 'hello' at byte 0 ${near('hello')}`);
  assert.equal(told('{"to":"bob","type":"t","data":undefined}'),
    `the body is not valid JSON: unexpected token 'undefined' at byte 30 ${near('…ype":"t","data":undefined}')}`);
  // V8 names the '}' after the misspelt literal.
  assert.equal(told('{"to":"bob","type":"t","data":tru}'), `the body is not valid JSON: unexpected token 'tru' at byte 30 ${near('…ype":"t","data":tru}')}`);
  assert.equal(told('[1,]'), `the body is not valid JSON: unexpected token ']' at byte 3 ${near('[1,]')}`);
  // A long word is cut; a control character is escaped; the byte counts a leading BOM (3 bytes).
  assert.equal(told('x'.repeat(40)), `the body is not valid JSON: unexpected token '${'x'.repeat(16)}…' at byte 0 ${near(`${'x'.repeat(16)}…`)}`);
  assert.equal(told('\u0001'), `the body is not valid JSON: unexpected token '\\u0001' at byte 0 ${near('\u0001')}`);
  assert.match(told('\ufeff{"a":x}'), /unexpected token 'x' at byte 8 /);
  assert.equal(told('{"a":'), 'the body is not valid JSON: it ends before its JSON value does (5 characters)');
});

test('a body that is one bad word, of which V8 says only that it is not JSON, gets its cause and place', () => {
  for (const word of ['NaN', 'undefined', 'Infinity']) {
    assert.equal(told(word), `the body is not valid JSON: unexpected token '${word}' at byte 0 ${near(word)}`);
  }
});

test('an error that is not the parser\'s says only that the body is not JSON', () => {
  assert.equal(notJsonMessage('x', new Error('other')), 'the body is not valid JSON');
});
