/**
 * Memory per idle WebSocket connection, cheaply: bench:e2e's case (c) alone, without
 * its bare relay, its load process or the other cases, for comparing two versions of
 * the code on a shared machine in about 30 s a run. A `pixiu serve` child as `npm start`
 * runs it (dist/, built first), with bench:e2e's gc hook (bench/lib/gc-hook.mjs) and a
 * private redis-server; 200 connections opened and closed first (so that the code
 * paths are compiled before the baseline), then `n` idle connections of distinct users
 * (device `d1`, no cursor: each gets `welcome` and nothing more), opened from this
 * process. The server's RSS and heap used (its /metrics) after a full GC, before and
 * after, divided by `n`, are printed as one JSON line
 * `{n, rssPerConn, heapUsedPerConn, rss: [before, after], heapUsed: [before, after]}` (bytes).
 *
 * With `--snapshot`, the gc hook writes a heap snapshot at each of the two collections
 * (into a temp dir removed at the end; `--snapshot=<dir>` writes them there and keeps
 * them, for a closer look in Chrome DevTools) and what each connection holds is printed
 * after the line: new objects grouped by kind and holder (bench/lib/heap-diff.ts),
 * those of 4 bytes or more per connection. A snapshot grows the server's RSS by about
 * its size: that run's RSS figure means nothing.
 *
 * RSS varies by several KiB per connection from run to run of the same code (what V8
 * keeps committed after the GC, and malloc's arenas: bench/README.md); heap used by
 * about ±0.1 KiB. Compare medians of a few runs.
 *
 * Run: node --import tsx bench/lib/idle-memory.ts [n, default 5000] [--snapshot[=<dir>]]
 */
import os from 'node:os';
import path from 'node:path';
import { mkdtemp, rm } from 'node:fs/promises';
import WebSocket from 'ws';
import { waitUntil } from '../../test/harness/checks.js';
import { REPO_ROOT, cleanupList, tempDataDir, type ServeProcess } from '../../test/harness/pixiu-server.js';
import { RedisServer } from '../../test/harness/redis-server.js';
import { testToken } from '../../test/harness/ws-client.js';
import { heapDiff } from './heap-diff.js';
import { buildServe, spawnCompiledServe } from './serve-flags.js';

const JWT_SECRET = 'bench-idle-jwt-secret-0123456789abcdef0123456789';
const GC_HOOK = path.join(REPO_ROOT, 'bench/lib/gc-hook.mjs');
/** Handshakes in flight while connecting. */
const CONCURRENCY = 50;
/** Groups printed with --snapshot: at least this many bytes per connection. */
const PRINT_BYTES = 4;

const args = process.argv.slice(2);
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 5000);
/** `--snapshot`: '' (a temp dir); `--snapshot=<dir>`: that dir; undefined: no snapshots. */
const snapshotArg = args.find((a) => a === '--snapshot' || a.startsWith('--snapshot='))?.slice('--snapshot='.length);

/** What the gc hook read after a full GC, and the server's /metrics then. */
interface Memory {
  readonly rss: number;
  readonly heapUsed: number;
  readonly snapshot: string | undefined;
}

function gauge(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
}

async function metrics(server: ServeProcess): Promise<string> {
  return (await fetch(`${server.url}/metrics`)).text();
}

/** Asks the server's gc hook for a full GC (and a snapshot, when it writes them), then reads /metrics. */
async function memory(server: ServeProcess): Promise<Memory> {
  const lines = (): string[] => server.stdout().split('\n').filter((l) => l.includes('"bench gc done"'));
  const seen = lines().length;
  server.proc.kill('SIGUSR2');
  await waitUntil('the server gc hook', async () => lines().length > seen, 120_000, 20);
  const line = JSON.parse(lines()[lines().length - 1] ?? '{}') as { exposed?: boolean; snapshot?: string };
  if (line.exposed !== true) throw new Error('the server runs without --expose-gc');
  const text = await metrics(server);
  return { rss: gauge(text, 'pixiu_process_resident_memory_bytes'), heapUsed: gauge(text, 'pixiu_nodejs_heap_size_used_bytes'), snapshot: line.snapshot };
}

/** Opens `count` connections of users `<prefix>0…`, each resolved at its first frame (`welcome`). */
async function open(url: string, prefix: string, count: number): Promise<WebSocket[]> {
  const sockets: WebSocket[] = [];
  const base = url.replace(/^http/, 'ws');
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const token = await testToken({ kind: 'secret', secret: JWT_SECRET }, `${prefix}${next++}`, { ttlSec: 3600 });
      const ws = new WebSocket(`${base}/v1/connect?device=d1`, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
      ws.on('error', () => undefined);
      await new Promise<void>((resolve, reject) => {
        ws.once('message', () => resolve());
        ws.once('close', (code) => reject(new Error(`connection closed ${code} before welcome`)));
      });
      sockets.push(ws);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return sockets;
}

async function closeAll(sockets: readonly WebSocket[]): Promise<void> {
  await Promise.all(sockets.map((ws) => new Promise<void>((resolve) => {
    ws.once('close', () => resolve());
    ws.close(1000);
  })));
}

async function main(): Promise<void> {
  buildServe();
  const files = cleanupList();
  try {
    const redis = await RedisServer.start({ aof: false });
    files.after(() => redis.destroy());
    let snapshotDir = snapshotArg === undefined ? undefined : path.resolve(snapshotArg);
    if (snapshotArg === '') {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-idle-snapshots-'));
      files.after(() => rm(dir, { recursive: true, force: true }));
      snapshotDir = dir;
    }
    const server = await spawnCompiledServe(['--import', GC_HOOK], {
      PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(files, 'pixiu-idle-'), PIXIU_PORT: '0',
      PIXIU_API_TOKEN: 'bench-idle-api-token-0123456789', PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info',
      NODE_OPTIONS: '--expose-gc', ...(snapshotDir === undefined ? {} : { BENCH_HEAP_SNAPSHOT_DIR: snapshotDir }),
    }, files);
    const connected = (count: number): Promise<void> => waitUntil(`${count} connections on the server`,
      async () => gauge(await metrics(server), 'pixiu_ws_connections') === count, 30_000, 20);
    await closeAll(await open(server.url, 'warm-', 200));
    await connected(0);
    const before = await memory(server);
    const sockets = await open(server.url, 'idle-', n);
    await connected(n);
    const after = await memory(server);
    console.log(JSON.stringify({
      n, rssPerConn: Math.round((after.rss - before.rss) / n), heapUsedPerConn: Math.round((after.heapUsed - before.heapUsed) / n),
      rss: [before.rss, after.rss], heapUsed: [before.heapUsed, after.heapUsed],
    }));
    await closeAll(sockets);
    if (before.snapshot !== undefined && after.snapshot !== undefined) {
      const { total, groups } = heapDiff(before.snapshot, after.snapshot, n);
      console.log(`new objects per connection (self size): ${total.toFixed(0)} bytes`);
      for (const g of groups) {
        if (g.bytes >= PRINT_BYTES) console.log(`${g.bytes.toFixed(1).padStart(8)} B ${g.count.toFixed(2).padStart(6)}  ${g.group}`);
      }
    }
  } finally {
    await files.run();
  }
}

await main();
