/**
 * A stored record whose bytes cannot be decoded (src/store/unreadable.ts) is answered
 * by the store as the unreadable mark in its place, never a throw for the whole read:
 * bytes that are no JSON, JSON of another shape, a `kind` this release does not know.
 * Logged once per record at error with its MsgID and partition, however often it is
 * read; a broken record whose head says it has expired reads as expired (null). The
 * records are broken on disk with classic-level while the store is closed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { messageKey } from '../../src/store/keys.js';
import { isUnreadable } from '../../src/store/unreadable.js';
import { capturingLogger } from '../harness/log-capture.js';
import { decoded } from '../harness/checks.js';
import { fakeClock, openStore, tempDir } from './fixtures/store-harness.js';

test('records that cannot be decoded are the unreadable mark in their place, logged once each; the others read as stored', async (t) => {
  const dir = await tempDir(t);
  const clock = fakeClock();
  const store = await openStore(t, dir, { partitions: 1, now: clock.now });
  const names = ['good', 'no-json', 'no-type', 'kind-9', 'expiring'];
  const ids: string[] = [];
  for (const name of names) ids.push((await store.put({ kind: 1, type: 't', data: name, to: ['u'], ttlMs: name === 'expiring' ? 10_000 : 3_600_000 })).id);
  await store.close();

  const db = new ClassicLevel<Buffer, Buffer>(path.join(dir, '0'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  const rewrite = async (at: number, edit: (text: string) => string): Promise<void> => {
    const key = messageKey(ids[at] as string);
    await db.put(key, Buffer.from(edit((await db.get(key))?.toString('utf8') ?? '')));
  };
  await rewrite(1, (s) => s.slice(0, -3));
  await rewrite(2, (s) => s.replace('"type":"t",', ''));
  await rewrite(3, (s) => s.replace('"kind":1', '"kind":9'));
  await rewrite(4, (s) => s.slice(0, -3));
  await db.close();

  const { logger, lines } = capturingLogger();
  const reopened = await openStore(t, dir, { partitions: 1, now: clock.now, logger });
  const read = async (): Promise<unknown[]> => (await reopened.getMany(ids)).map((r) => (isUnreadable(r) ? 'unreadable' : decoded(r)?.data ?? null));
  assert.deepEqual(await read(), ['good', 'unreadable', 'unreadable', 'unreadable', 'unreadable']);
  assert.equal(decoded(await reopened.get(ids[0] as string))?.data, 'good');
  assert.ok(isUnreadable(await reopened.get(ids[1] as string)));
  assert.deepEqual(await read(), ['good', 'unreadable', 'unreadable', 'unreadable', 'unreadable'], 'the same when read again');

  const logged = lines.filter((l) => l.msg?.startsWith('stored message cannot be decoded') === true);
  assert.deepEqual(logged.map((l) => l.msgId), ids.slice(1), 'one line per record, however often read');
  assert.ok(logged.every((l) => l.level === 50 && l.partition === 0 && typeof l.reason === 'string'), JSON.stringify(logged));
  assert.match(String(logged[0]?.reason), /JSON/);

  // Its head says when it expires: past that it reads as any expired record.
  clock.ms += 20_000;
  assert.deepEqual(await read(), ['good', 'unreadable', 'unreadable', 'unreadable', null]);
});
