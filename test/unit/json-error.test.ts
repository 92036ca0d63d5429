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

test('an unexpected token is named without the text the parser quotes; a body cut short says so', () => {
  assert.equal(told(`{"data":"${'s'.repeat(200)}","n":NaN}`), 'the body is not valid JSON: unexpected token \'N\'');
  assert.equal(told('{"a":'), 'the body is not valid JSON: it ends before its JSON value does (5 characters)');
});

test('an error that is not the parser\'s says only that the body is not JSON', () => {
  assert.equal(notJsonMessage('x', new Error('other')), 'the body is not valid JSON');
});
