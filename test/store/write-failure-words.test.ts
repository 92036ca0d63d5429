/**
 * The cause a failed store write is refused with (src/store/write-recovery.ts
 * `writeFailureWords`): LevelDB's last words, never the file's path.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFailureWords } from '../../src/store/write-recovery.js';

test("a failed write's cause is the end of LevelDB's error, without its path", () => {
  assert.equal(writeFailureWords(new Error('IO error: /data/xiu/6/000003.log: No space left on device')), 'No space left on device');
  assert.equal(writeFailureWords(new Error('Input/output error')), 'Input/output error');
  assert.equal(writeFailureWords(new Error('IO error: /data/xiu/6/000003.log')), undefined);
  assert.equal(writeFailureWords(new Error('IO error: /data/my xiu/6/000003.log')), undefined);
  assert.equal(writeFailureWords(new Error('IO error: xiu/6/000003.log')), undefined);
  assert.equal(writeFailureWords(new Error('IO error: C:\\data\\xiu\\000003.log')), undefined);
  assert.equal(writeFailureWords(new Error('')), undefined);
  assert.equal(writeFailureWords(new Error(`IO error: ${'x'.repeat(200)}`)), undefined);
  assert.equal(writeFailureWords('not an error'), undefined);
});
