import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import { prepareRecord, publicationDataJson } from '../../src/store/record.js';
import { counterOf, openStore, rawKeys, tempDir } from './fixtures/store-harness.js';
import { decoded } from '../harness/checks.js';

const LIMIT = 1024;

/** UTF-8 bytes the limit counts: the JSON of {type, from, data}. */
function contentBytes(type: string, data: unknown, from?: string): number {
  return Buffer.byteLength(JSON.stringify({ type, from, data }));
}

/** A string `data` whose {type, data} JSON is exactly `bytes` long, in 3-byte chars ('€'). */
function dataOfBytes(type: string, bytes: number): string {
  const base = contentBytes(type, '');
  const euros = Math.floor((bytes - base) / 3);
  const text = '€'.repeat(euros) + 'e'.repeat(bytes - base - euros * 3);
  assert.equal(contentBytes(type, text), bytes);
  return text;
}

test('over the size limit: PAYLOAD_TOO_LARGE, nothing stored, no counter taken; exactly at it: stored', async (t) => {
  const dir = await tempDir(t);
  // One partition, so consecutive counters show whether one was taken.
  const store = await openStore(t, dir, { partitions: 1, maxMessageBytes: LIMIT });
  const before = await store.put({ kind: 1, type: 'size', data: 'small', to: ['a'] });

  const over = dataOfBytes('size', LIMIT + 1);
  await assert.rejects(store.put({ kind: 1, type: 'size', data: over, to: ['a'], clientMsgId: 'too-big' }), (err) => {
    assert.ok(isPixiuError(err, 'PAYLOAD_TOO_LARGE'));
    assert.match(err.message, new RegExp(`${LIMIT + 1} bytes.*${LIMIT} bytes`));
    return true;
  });

  const atLimit = await store.put({ kind: 1, type: 'size', data: dataOfBytes('size', LIMIT), to: ['a'] });
  assert.equal(counterOf(atLimit.id), counterOf(before.id) + 1, 'the refused put took no counter');
  // Its client_msg_id was not recorded either: the same key now stores anew.
  const retry = await store.put({ kind: 1, type: 'size', data: 'fits', to: ['a'], clientMsgId: 'too-big' });
  assert.equal(retry.duplicate, false);
  assert.equal(decoded(await store.get(atLimit.id))?.data, dataOfBytes('size', LIMIT));
  await store.close();

  const keys = await rawKeys(dir, 0);
  assert.equal(keys.message.length, 3, 'before, at-limit and retry: nothing of the refused put');
  assert.deepEqual([...keys.clientIdValues], [['too-big', retry.id]]);
});

test('the limit counts UTF-8 bytes of {type, from, data}, and not the recipient list', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { maxMessageBytes: LIMIT });
  const to = Array.from({ length: 1000 }, (_, i) => `recipient-number-${i}`);
  const ok = await store.put({ kind: 1, type: 'size', from: 'sender', data: 'x', to });
  assert.equal(decoded(await store.get(ok.id))?.to?.length, 1000);

  // 300 chars, but 900 bytes of '€' plus `from` push it over.
  const euros = '€'.repeat(300);
  assert.ok(contentBytes('size', euros) <= LIMIT);
  const from = 'f'.repeat(LIMIT - contentBytes('size', euros));
  assert.ok(contentBytes('size', euros, from) > LIMIT);
  await assert.rejects(store.put({ kind: 1, type: 'size', from, data: euros, to: ['a'] }), (err) => isPixiuError(err, 'PAYLOAD_TOO_LARGE'));
});

test('prepareRecord measures exactly JSON.stringify({type, from, data}) in UTF-8 bytes', () => {
  const cases: [string, unknown, string | undefined][] = [
    ['t', null, undefined], ['type', { a: [1, 2, { b: '😀' }] }, 'from-😀'], ['x', '\u0000\u001f\ud800', '\udfff'], ['é', 1.5e-7, ''],
  ];
  for (const [type, data, from] of cases) {
    const prep = prepareRecord({ kind: 1, type, data, from }, 0, { defaultTtlMs: 1, maxMessageBytes: 1 << 20 });
    assert.equal(prep.contentBytes, contentBytes(type, data, from));
  }
});

test('data that is not a JSON value, and bad fields, are INVALID_REQUEST before anything is stored', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1 });
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const bad: unknown[] = [
    { kind: 1, type: 't', data: undefined },
    { kind: 1, type: 't', data: () => 1 },
    { kind: 1, type: 't', data: Symbol('s') },
    { kind: 1, type: 't', data: 10n },
    { kind: 1, type: 't', data: cyclic },
    { kind: 9, type: 't', data: 1 },
    { kind: 1, type: '', data: 1 },
    { kind: 1, type: 'x'.repeat(65), data: 1 },
    { kind: 1, type: 't', data: 1, clientMsgId: 'é' },
    { kind: 1, type: 't', data: 1, clientMsgId: 'k'.repeat(129) },
    { kind: 1, type: 't', data: 1, ttlMs: 0 },
    { kind: 1, type: 't', data: 1, to: 'alice' },
    { kind: 1, type: 't', data: 1, to: ['alice', 7] },
    { kind: 1, type: 't', data: 1, from: 7 },
    { kind: 2, type: 't', data: 1, room: 7 },
    { kind: 1, type: 't', data: 1, clientMsgId: 'del\x7f' },
    { kind: 1, type: 't', data: 1, tsMs: -1 },
    { kind: 1, type: 't', data: { n: Infinity } },
    { kind: 1, type: 't', data: -Infinity },
    { kind: 1, type: 't', data: JSON.parse('['.repeat(65) + ']'.repeat(65)) as unknown },
  ];
  for (const [i, msg] of bad.entries()) {
    await assert.rejects(store.put(msg as Parameters<typeof store.put>[0]), (err) => isPixiuError(err, 'INVALID_REQUEST'), `case ${i}`);
  }
  const ok = await store.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  assert.equal(counterOf(ok.id), 1, 'no refused put took a counter');
});

test('a channel publication is measured as a message is: JSON.stringify({type, data}) in UTF-8 bytes, type included', () => {
  const type = 'é'.repeat(40);
  const data = dataOfBytes(type, LIMIT);
  assert.equal(publicationDataJson(type, data, LIMIT), JSON.stringify(data), 'exactly at the limit');
  assert.throws(() => publicationDataJson(type, dataOfBytes(type, LIMIT + 1), LIMIT), (err) => isPixiuError(err, 'PAYLOAD_TOO_LARGE'));
});
