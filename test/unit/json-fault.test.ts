/**
 * Where a text stops being JSON (src/api/json-fault.ts): it must call JSON exactly
 * what JSON.parse takes, or a refusal would name a place in a body that has no fault
 * (or none where one is).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { firstJsonFault } from '../../src/api/json-fault.js';

test('JSON texts have no fault; the fault of others is where the grammar breaks, or the text\'s end', () => {
  for (const text of ['{}', '[]', '0', '-0.5e+3', '"a\\u00e9\\n"', ' {"a":[1,{"b":null}],"c":true} \n', '\ufeff[]', '""', '[[],[{}]]', 'false']) {
    assert.equal(firstJsonFault(text), undefined, text);
  }
  const faults: Array<[string, number]> = [
    ['to=bob', 0], ['{"a":tru}', 5], ['[1,]', 3], ['{"a":1,}', 7], ["{'a':1}", 1], ['[1 2]', 3], ['"a\u0001"', 2],
    ['"\\q"', 1], ['-', 1], ['01', 1], ['{"a" 1}', 5], ['{"a":1}x', 7], ['[', 1], ['{"a":', 5], ['"abc', 4], ['', 0],
  ];
  for (const [text, at] of faults) assert.equal(firstJsonFault(text), at, JSON.stringify(text));
});

test('on texts made at random from JSON\'s pieces, it finds a fault exactly when JSON.parse throws', () => {
  const pieces = ['{', '}', '[', ']', ',', ':', '"', 'a', '1', '0', '-', '.', 'e', '+', ' ', '\n', 't', 'true', 'null', 'false', '\\', '\\u00e9', '"k"', 'é', '\u0001', 'NaN'];
  let seed = 12345;
  const next = (below: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % below;
  };
  for (let k = 0; k < 50_000; k++) {
    let text = '';
    for (let j = 1 + next(10); j > 0; j--) text += pieces[next(pieces.length)];
    let parses = true;
    try {
      JSON.parse(text);
    } catch {
      parses = false;
    }
    assert.equal(firstJsonFault(text) === undefined, parses, JSON.stringify(text));
  }
});
