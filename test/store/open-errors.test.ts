import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { StartupError } from '../../src/errors.js';
import { MessageStore } from '../../src/store/message-store.js';
import { openStore, storeOptions, tempDir } from './fixtures/store-harness.js';

function startupError(...needles: string[]): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof StartupError, `a StartupError, got ${String(err)}`);
    for (const needle of needles) assert.ok(err.message.includes(needle), `"${err.message}" names ${needle}`);
    return true;
  };
}

test('a store folder already open elsewhere: StartupError naming each locked folder', async (t) => {
  const dir = await tempDir(t);
  const first = await openStore(t, dir, { partitions: 2 });
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 2 })),
    startupError(path.join(dir, '0'), path.join(dir, '1'), 'locked by another process'));
  // The first store is untouched.
  const { id } = await first.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  assert.equal((await first.get(id))?.data, 1);
});

test('one locked partition: the error names it, and the partitions opened meanwhile are released', async (t) => {
  const dir = await tempDir(t);
  const holder = new ClassicLevel(path.join(dir, '1'));
  await holder.open();
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 2 })), (err) => {
    startupError(path.join(dir, '1'), 'locked')(err);
    assert.ok(!(err as Error).message.includes(path.join(dir, '0')), 'partition 0 opened fine');
    return true;
  });
  await holder.close();
  // Partition 0 was closed again: a new open gets its lock.
  const store = await openStore(t, dir, { partitions: 2 });
  assert.equal(store.isOpen, true);
});

test('a partition path that is a file: StartupError saying the folder cannot be read', async (t) => {
  const dir = await tempDir(t);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, '0'), 'not a folder');
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 1 })),
    startupError(path.join(dir, '0'), 'cannot be read', 'not a folder'));
});

test('a partition whose CURRENT file is garbage: StartupError saying the folder cannot be read', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1 });
  await store.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  await store.close();
  await writeFile(path.join(dir, '0', 'CURRENT'), 'garbage');
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 1 })),
    startupError(path.join(dir, '0'), 'cannot be read'));
});

test('a partition count that is not a power of two up to 256 is a StartupError', async (t) => {
  const dir = await tempDir(t);
  for (const partitions of [0, 3, 12, 512]) {
    await assert.rejects(MessageStore.open(storeOptions(dir, { partitions })), startupError('power of two'));
  }
});

test('a store reopened with another partition count is refused, naming the count it was created with', async (t) => {
  const dir = await tempDir(t);
  const store = await MessageStore.open(storeOptions(dir, { partitions: 4 }));
  const { id } = await store.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  await store.close();
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 8 })),
    startupError(dir, 'created with 4 partitions', 'PIXIU_PARTITIONS=4'));
  const again = await openStore(t, dir, { partitions: 4 });
  assert.equal((await again.get(id))?.data, 1);
});
