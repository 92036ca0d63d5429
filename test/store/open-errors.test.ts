import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { ClassicLevel } from 'classic-level';
import { StartupError, isPixiuError } from '../../src/errors.js';
import { MAX_COUNTER } from '../../src/ids/msg-id.js';
import { HIGH_WATER_KEY } from '../../src/store/keys.js';
import { PARTITION_HASH, checkLayout, openLayout } from '../../src/store/layout.js';
import { MessageStore } from '../../src/store/message-store.js';
import { nodeArgsFor, siblingModule } from '../harness/test-build.js';
import { openStore, storeOptions, tempDir } from './fixtures/store-harness.js';
import { decoded } from '../harness/checks.js';

const OPEN_PARTITION = siblingModule(import.meta.url, './fixtures/open-partition');

function startupError(...needles: string[]): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof StartupError, `a StartupError, got ${String(err)}`);
    for (const needle of needles) assert.ok(err.message.includes(needle), `"${err.message}" names ${needle}`);
    return true;
  };
}

test('a store folder already open elsewhere: StartupError naming partition 0 as locked, whose lock is the store\'s', async (t) => {
  const dir = await tempDir(t);
  const first = await openStore(t, dir, { partitions: 2 });
  // Partition 0 is opened alone first: the others are not tried (test/store/open-race.test.ts).
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 2 })), (err) => {
    assert.ok(err instanceof StartupError, `a StartupError, got ${String(err)}`);
    assert.equal(err.message, `store partition folder ${path.join(dir, '0')} is locked by another process (its LevelDB LOCK is held): another pixiu may be using this data dir`);
    return true;
  });
  // The first store is untouched.
  const { id } = await first.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  assert.equal(decoded(await first.get(id))?.data, 1);
});

test('one locked partition: the error names it, and the partitions opened meanwhile are released', async (t) => {
  const dir = await tempDir(t);
  await checkLayout(dir, 2); // a store's own partition held, not a LevelDB folder without a LAYOUT
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

test('a partition path that is a file: StartupError saying the folder cannot be opened', async (t) => {
  const dir = await tempDir(t);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, '0'), 'not a folder');
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 1 })),
    startupError(path.join(dir, '0'), 'cannot be opened', 'not a folder'));
});

test('a partition whose CURRENT file is garbage: StartupError saying the folder cannot be opened', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(t, dir, { partitions: 1 });
  await store.put({ kind: 1, type: 't', data: 1, to: ['a'] });
  await store.close();
  await writeFile(path.join(dir, '0', 'CURRENT'), 'garbage');
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 1 })),
    startupError(path.join(dir, '0'), 'cannot be opened'));
});

test('a partition folder this process may not write in: it cannot be opened (not "read"), naming the uid and the cause', async (t) => {
  const dir = await tempDir(t);
  const folder = path.join(dir, '0');
  await mkdir(folder, { recursive: true });
  // Readable, not writable: LevelDB's LOCK cannot be made. Root writes anyhow, so a
  // root run opens it as nobody (uid 65534), whom the temp folder (0700) must let in.
  await chmod(folder, 0o555);
  const asRoot = process.getuid?.() === 0;
  if (asRoot) await chmod(dir, 0o755);
  const uid = asRoot ? 65534 : process.getuid?.();
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeArgsFor(OPEN_PARTITION), folder],
    asRoot ? { uid: 65534, gid: 65534 } : {});
  assert.match(stdout, new RegExp(`^store partition folder ${folder} cannot be opened: IO error: ${folder}/LOCK: Permission denied — this process \\(uid ${uid}\\) may not write in it \\(LevelDB keeps its lock and logs there\\)$`));
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
  assert.equal(decoded(await again.get(id))?.data, 1);
});

test('a store whose layout names another partition hash is refused: its ids and retries would be looked up in the wrong partitions', async (t) => {
  const dir = await tempDir(t);
  await (await MessageStore.open(storeOptions(dir, { partitions: 2 }))).close();
  const layout = JSON.parse(await readFile(path.join(dir, 'LAYOUT'), 'utf8')) as Record<string, unknown>;
  await writeFile(path.join(dir, 'LAYOUT'), `${JSON.stringify({ ...layout, hash: 'murmur3-32' })}\n`);
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 2 })),
    startupError(dir, 'uses partition hash "murmur3-32"', PARTITION_HASH));
});

/** Writes partition `p`'s counter high-water mark on disk (the store closed). */
async function writeHighWaterMark(dir: string, p: number, mark: string): Promise<void> {
  const db = new ClassicLevel<Buffer, Buffer>(path.join(dir, String(p)), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open();
  try {
    await db.put(HIGH_WATER_KEY, Buffer.from(mark, 'latin1'));
  } finally {
    await db.close();
  }
}

test('a partition whose counter high-water mark is past the largest MsgID counter is refused at open, naming the folder', async (t) => {
  const dir = await tempDir(t);
  await (await MessageStore.open(storeOptions(dir, { partitions: 1 }))).close();
  await writeHighWaterMark(dir, 0, String(MAX_COUNTER + 1));
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 1 })),
    startupError(path.join(dir, '0'), 'cannot be read', `high-water mark "${MAX_COUNTER + 1}" is not a counter`));
  // The largest counter itself is a mark the store can hold.
  await writeHighWaterMark(dir, 0, String(MAX_COUNTER));
  const store = await openStore(t, dir, { partitions: 1 });
  assert.deepEqual(store.counters, [MAX_COUNTER]);
});

test('the largest layouts open: 256 partitions, and a base whose block ends at partition byte 255', async (t) => {
  const full = await openStore(t, await tempDir(t), { partitions: 256 });
  assert.equal(full.counters.length, 256);
  const last = await openStore(t, await tempDir(t), { partitions: 2, partitionBase: 254 });
  const { id } = await last.put({ kind: 1, type: 't', data: 'top', to: ['a'] });
  assert.ok(['fe', 'ff'].includes(id.slice(0, 2)), id);
  assert.equal(decoded(await last.get(id))?.data, 'top');
  // One more partition byte than there is: refused.
  await assert.rejects(MessageStore.open(storeOptions(await tempDir(t), { partitions: 2, partitionBase: 255 })), startupError('partition base'));
});

test('a partition whose counter reaches the largest MsgID counter mints that id, then refuses puts as UNAVAILABLE', async (t) => {
  const dir = await tempDir(t);
  await (await MessageStore.open(storeOptions(dir, { partitions: 1 }))).close();
  await writeHighWaterMark(dir, 0, String(MAX_COUNTER - 1));
  const store = await openStore(t, dir, { partitions: 1 });
  const last = await store.put({ kind: 1, type: 't', data: 'last', to: ['a'] });
  assert.equal(parseInt(last.id.slice(4), 16), MAX_COUNTER);
  await assert.rejects(store.put({ kind: 1, type: 't', data: 'one too many', to: ['a'] }),
    (err) => isPixiuError(err, 'UNAVAILABLE') && /used every message id/.test((err as Error).message));
  assert.equal(decoded(await store.get(last.id))?.data, 'last');
});

test('a partition whose counter high-water mark is not a number is refused at open, naming the folder', async (t) => {
  const dir = await tempDir(t);
  await (await MessageStore.open(storeOptions(dir, { partitions: 1 }))).close();
  await writeHighWaterMark(dir, 0, '12abc');
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 1 })),
    startupError(path.join(dir, '0'), 'cannot be read', 'high-water mark "12abc" is not a counter'));
});

test('a layout that is no object, or whose partition base runs past partition byte 255, is refused naming the file', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'LAYOUT');
  await writeFile(file, 'null\n');
  await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 2 })), startupError(file, 'is damaged: it is not a JSON object'));
  await writeFile(file, `${JSON.stringify({ format: 1, partitions: 2, hash: PARTITION_HASH, storeId: 'abc', partitionBase: 255 })}\n`);
  await assert.rejects(checkLayout(dir, 2, 254), startupError(file, 'partition base 255 out of range'));
});

test('a layout that is not JSON, or lost its "partitions" or "hash", is refused as damaged with the restore advice, not as another count or hash to start with (verifier, low)', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'LAYOUT');
  const advice = 'restore it from the backup the data dir came from, or rebuild it (README "Backups and restores")';
  const refused = async (text: string, ...needles: string[]): Promise<void> => {
    await writeFile(file, text);
    await assert.rejects(MessageStore.open(storeOptions(dir, { partitions: 2 })), (err) => {
      startupError(file, 'is damaged', ...needles, advice)(err);
      assert.doesNotMatch((err as Error).message, /undefined|move the store folder away/);
      return true;
    });
  };
  await refused('', 'it is not valid JSON');
  await refused(`${JSON.stringify({ format: 1, hash: PARTITION_HASH, storeId: 'abc' })}\n`, 'it has no "partitions"');
  await refused(`${JSON.stringify({ format: 1, partitions: 0, hash: PARTITION_HASH, storeId: 'abc' })}\n`, 'its "partitions" 0 is not a count of 1 to 256');
  await refused(`${JSON.stringify({ format: 1, partitions: 2, storeId: 'abc' })}\n`, 'it has no "hash"');
  await refused(`${JSON.stringify({ format: 1, partitions: 2, hash: 7, storeId: 'abc' })}\n`, 'its "hash" 7 is not a name');
});

test('two opens of a new store at once agree on the layout one of them wrote', async (t) => {
  const dir = await tempDir(t);
  await Promise.all([checkLayout(dir, 4), checkLayout(dir, 4)]);
  const layout = JSON.parse(await readFile(path.join(dir, 'LAYOUT'), 'utf8')) as Record<string, unknown>;
  assert.equal(layout.partitions, 4);
});

test('every value a refusal reads from the layout is quoted: a newline or C1 control in it gives one line, escaped (reviewer F5)', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'LAYOUT');
  const hostile = 'x\npixiu: ok\u009b2J';
  const valid = { format: 1, partitions: 8, hash: PARTITION_HASH, storeId: 'abc' };
  const cases: [Record<string, unknown>, string][] = [
    [{ hash: hostile }, 'uses partition hash'],
    [{ partitions: hostile }, 'its "partitions"'],
    [{ storeId: hostile }, 'malformed storeId'],
    [{ partitionBase: hostile }, 'partition base'],
    [{ redisPrefix: hostile }, 'malformed redisPrefix'],
    [{ redisDb: hostile }, 'malformed redisDb'],
  ];
  for (const [field, needle] of cases) {
    await writeFile(file, `${JSON.stringify({ ...valid, ...field })}\n`);
    await assert.rejects(openLayout(dir, 8), (err: unknown) => {
      assert.ok(err instanceof StartupError, `a StartupError, got ${String(err)}`);
      assert.ok(err.message.includes(needle), `"${err.message}" names ${needle}`);
      assert.doesNotMatch(err.message, /[^\x20-\x7e]/, `${JSON.stringify(field)}: ${JSON.stringify(err.message)}`);
      assert.ok(err.message.includes('"x\\npixiu: ok\\u009b2J"'), err.message);
      return true;
    });
  }
});

test('a store whose LAYOUT is gone while its partitions hold data is refused by checkLayout too, not made a new store (reviewer F9)', async (t) => {
  const dir = await tempDir(t);
  await (await MessageStore.open(storeOptions(dir, { partitions: 2 }))).close();
  await rm(path.join(dir, 'LAYOUT'));
  await assert.rejects(checkLayout(dir, 2), startupError(path.join(dir, 'LAYOUT'), 'is missing', 'holds message partitions (0, 1)'));
  await assert.rejects(readFile(path.join(dir, 'LAYOUT')), { code: 'ENOENT' });
});
