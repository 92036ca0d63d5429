/**
 * Reading a record back (src/store/record.ts): `expiresAtOf`, which the read cache
 * checks a written record's expiry with, answers NaN (treated as expired, never
 * served) for bytes that do not begin as every record is written; `recordOf` keeps the
 * MsgID it was read under and refuses what is no record: another shape, or a `kind`
 * this release does not know (readers then answer it as unreadable, a gap).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import { expiresAtOf, prepareRecord, recordOf } from '../../src/store/record.js';
import { MsgKind } from '../../src/ids/msg-id.js';

const ID = '0001000000000001';

test('expiresAtOf reads the expiry a record is written with, and NaN from bytes that do not begin that way', () => {
  const prep = prepareRecord({ kind: MsgKind.user, type: 't', data: 1 }, 1_800_000_000_000, { defaultTtlMs: 5000, maxMessageBytes: 1024 });
  assert.equal(expiresAtOf(prep.bytes), 1_800_000_005_000);
  for (const text of ['{"expiresAt":,"kind":1}', '{"expiresAt":12x,"kind":1}', '{"expiresAt":12', '{"expiresAX":12,"kind":1}', '{"kind":1,"expiresAt":12}']) {
    assert.ok(Number.isNaN(expiresAtOf(Buffer.from(text))), text);
  }
});

test('recordOf keeps the MsgID it reads a record under, and refuses a value that is no record (another shape, an unknown kind) as INTERNAL', () => {
  const record = recordOf({ id: 'ffffffffffffffff', expiresAt: 5, kind: 1, type: 't', data: { a: [1] }, ts: 1 }, ID);
  assert.equal(record.id, ID, 'a record\'s own id cannot replace its key');
  assert.ok(Object.isFrozen(record) && Object.isFrozen((record.data as { a: number[] }).a));
  const whole = { expiresAt: 5, kind: 1, type: 't', data: null, ts: 1 };
  assert.equal(recordOf(whole, ID).data, null, 'data null is data');
  const { data: _data, ...noData } = whole;
  const others = [noData, { ...whole, kind: 9 }, { ...whole, type: 3 }, { ...whole, ts: '1' }, { ...whole, expiresAt: undefined }];
  for (const bad of [null, 7, 'text', {}, { expiresAt: '5' }, ...others]) {
    assert.throws(() => recordOf(bad, ID), (err) => isPixiuError(err, 'INTERNAL'), JSON.stringify(bad));
  }
});
