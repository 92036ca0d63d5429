/**
 * Message store benchmark (DESIGN.md §3): durable puts/s of 1 KiB messages at
 * concurrency 1, 100 and 1,000 (fsync on, P=8, a fresh temp dir per case), getMany
 * of 50 ids, and in the same run the raw limit: classic-level chained batches of
 * 1,000 of the same records, `sync: true`, into 8 databases written concurrently.
 *
 * Why that raw setup: the store writes 8 partitions concurrently, each its own
 * database with its own fsyncs, so the raw side writes 8 databases concurrently too.
 * The raw loop builds each record the way the store must (`JSON.stringify` of the
 * same record, data included), because encoding is part of storing a message, not an
 * overhead of the store; a row with the values encoded in advance (LevelDB alone) is
 * printed beside it for reference.
 *
 * The headline pair (store at concurrency 1,000 and the raw limit) runs alternately,
 * 5 rounds each, and each side reports its median round, so that load from elsewhere
 * on the machine lowers a round rather than one side of the ratio.
 *
 * Run: `npm run bench:store`. Prints a table, then the headline JSON line.
 * BENCH_STORE_CACHE=<bytes> sets the read cache of the put cases (default 64 MiB, the
 * service's default; 0 turns it off), to see what caching written records costs.
 */
import { ClassicLevel } from 'classic-level';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MessageStore, type NewMessage } from '../src/store/message-store.js';
import { perSecond, printConditions, printHeadline, printTable, type Figure } from './lib/report.js';

const PARTITIONS = 8;
const MESSAGE_BYTES = 1024;
const RAW_BATCH = 1000;
const DAY_MS = 86_400_000;

/** data whose `{type, data}` JSON is exactly MESSAGE_BYTES of UTF-8. */
function payload(type: string): { text: string } {
  const overhead = Buffer.byteLength(JSON.stringify({ type, data: { text: '' } }));
  return { text: 'x'.repeat(MESSAGE_BYTES - overhead) };
}

const TYPE = 'chat';
const DATA = payload(TYPE);

function message(i: number, withClientId: boolean): NewMessage {
  const msg: NewMessage = { kind: 1, type: TYPE, data: DATA, to: [`user-${i % 100_000}`] };
  if (withClientId) msg.clientMsgId = `bench-${i}`;
  return msg;
}

/** Runs `concurrency` loops of `op` for `ms`; answers ops completed and elapsed ms. */
async function runFor(ms: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<{ n: number; ms: number }> {
  let n = 0;
  let issued = 0;
  const started = performance.now();
  const end = started + ms;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      await op(issued++);
      n++;
    }
  }));
  return { n, ms: performance.now() - started };
}

async function tempDir(name: string): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), `pixiu-bench-${name}-`));
}

function openStore(dir: string, cacheBytes = Number(process.env.BENCH_STORE_CACHE ?? 64 * 1024 * 1024)): Promise<MessageStore> {
  return MessageStore.open({
    dir, partitions: PARTITIONS, sync: true, cacheBytes, defaultTtlMs: 7 * DAY_MS,
    maxMessageBytes: 64 * 1024, sweepIntervalMs: 60_000,
  });
}

interface PutCase { readonly concurrency: number; readonly ms: number; readonly clientIds: boolean }

async function benchPuts(c: PutCase): Promise<Figure> {
  const dir = await tempDir('put');
  const store = await openStore(dir);
  try {
    const { n, ms } = await runFor(c.ms, c.concurrency, (i) => store.put(message(i, c.clientIds)));
    return {
      case: `store put, concurrency ${c.concurrency}${c.clientIds ? ', with client_msg_id' : ''}`,
      value: perSecond(n, ms), unit: 'msg/s', note: `${n} puts in ${(ms / 1000).toFixed(1)} s`,
    };
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function benchGetMany(ids: readonly string[], dir: string, cacheBytes: number, label: string): Promise<Figure> {
  const store = await openStore(dir, cacheBytes);
  try {
    const pick = (): string[] => Array.from({ length: 50 }, () => ids[Math.floor(Math.random() * ids.length)] ?? '');
    if (cacheBytes > 0) {
      // Warm the cache with every id once.
      for (let i = 0; i < ids.length; i += 500) await store.getMany(ids.slice(i, i + 500));
    }
    let missing = 0;
    const { n, ms } = await runFor(2500, 10, async () => {
      const got = await store.getMany(pick());
      missing += got.filter((r) => r === null).length;
    });
    if (missing > 0) throw new Error(`getMany answered ${missing} nulls for stored ids`);
    return { case: `getMany 50 ids, ${label}`, value: perSecond(n, ms), unit: 'calls/s', note: `${Math.round(perSecond(n * 50, ms)).toLocaleString('en-US')} records/s, concurrency 10, ${ids.length} records stored` };
  } finally {
    await store.close();
  }
}

/** The raw limit: sync chained batches of RAW_BATCH records into PARTITIONS databases at once. */
async function benchRaw(ms: number, encodeInLoop: boolean): Promise<Figure> {
  const dir = await tempDir('raw');
  const dbs = await Promise.all(Array.from({ length: PARTITIONS }, async (_, p) => {
    const db = new ClassicLevel<Buffer, Buffer>(path.join(dir, String(p)), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open();
    return db;
  }));
  // The store's record: every field but the id (the key), `expiresAt` first.
  const record = (counter: number): Buffer => {
    const ts = Date.now();
    return Buffer.from(JSON.stringify({ expiresAt: ts + 7 * DAY_MS, kind: 1, type: TYPE, data: DATA, to: [`user-${counter % 100_000}`], ts }));
  };
  const fixed = record(1);
  try {
    let n = 0;
    const started = performance.now();
    const end = started + ms;
    await Promise.all(dbs.map(async (db, p) => {
      let counter = 0;
      while (performance.now() < end) {
        const batch = db.batch();
        for (let i = 0; i < RAW_BATCH; i++) {
          const key = Buffer.allocUnsafe(9);
          key[0] = 0x6d;
          key[1] = p;
          key[2] = 1;
          key.writeUIntBE(++counter, 3, 6);
          batch.put(key, encodeInLoop ? record(counter) : fixed);
        }
        await batch.write({ sync: true });
        n += RAW_BATCH;
      }
    }));
    const elapsed = performance.now() - started;
    return {
      case: `raw classic-level, ${PARTITIONS} dbs x batches of ${RAW_BATCH}${encodeInLoop ? '' : ', values encoded in advance'}`,
      value: perSecond(n, elapsed), unit: 'msg/s',
      note: encodeInLoop ? 'sync; JSON records built in the loop (the headline limit)' : 'sync; LevelDB alone, for reference',
    };
  } finally {
    await Promise.all(dbs.map((db) => db.close()));
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The median of `rounds` runs of each of two cases, run alternately, so that a burst
 * of load from elsewhere on the machine lowers one round, not one side of the ratio.
 */
async function medianOfAlternating(rounds: number, a: () => Promise<Figure>, b: () => Promise<Figure>): Promise<[Figure, Figure]> {
  const as: Figure[] = [];
  const bs: Figure[] = [];
  for (let r = 0; r < rounds; r++) {
    as.push(await a());
    bs.push(await b());
  }
  const median = (fs: Figure[]): Figure => {
    const sorted = [...fs].sort((x, y) => x.value - y.value);
    const mid = sorted[Math.floor(sorted.length / 2)] ?? fs[0];
    if (mid === undefined) throw new Error('no rounds');
    const all = fs.map((f) => Math.round(f.value).toLocaleString('en-US')).join(' / ');
    return { ...mid, note: `${mid.note ?? ''}; median of ${rounds} rounds: ${all}` };
  };
  return [median(as), median(bs)];
}

async function main(): Promise<void> {
  printConditions({ partitions: PARTITIONS, durability: 'fsync', 'message bytes': MESSAGE_BYTES, tmpdir: os.tmpdir() });
  const figures: Figure[] = [];
  figures.push(await benchPuts({ concurrency: 1, ms: 2000, clientIds: false }));
  figures.push(await benchPuts({ concurrency: 100, ms: 2500, clientIds: false }));
  const [headline, raw] = await medianOfAlternating(5,
    () => benchPuts({ concurrency: 1000, ms: 2000, clientIds: false }),
    () => benchRaw(2000, true));
  figures.push(headline);
  figures.push(await benchPuts({ concurrency: 1000, ms: 2500, clientIds: true }));
  figures.push(raw);
  figures.push(await benchRaw(2500, false));

  // getMany over a store holding 100,000 records.
  const dir = await tempDir('get');
  try {
    const store = await openStore(dir, 0);
    const ids: string[] = [];
    for (let i = 0; i < 100_000; i += 1000) {
      const puts = await Promise.all(Array.from({ length: 1000 }, (_, j) => store.put(message(i + j, false))));
      for (const p of puts) ids.push(p.id);
    }
    await store.close();
    figures.push(await benchGetMany(ids, dir, 0, 'cache off'));
    figures.push(await benchGetMany(ids, dir, 256 * 1024 * 1024, 'cache warm'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }

  printTable(figures);
  printHeadline('store put, concurrency 1000', headline.value, 'msg/s', raw.value);
}

await main();
