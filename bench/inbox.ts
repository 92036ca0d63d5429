/**
 * Inbox append throughput (DESIGN.md §4): `Inbox.append` on one client from
 * `createRedis`, against the raw ceiling measured in the same run: the same Lua body
 * sent with EVALSHA through plain ioredis pipelines, with no Pixiu code around it.
 *
 * Both paths append the same MsgIDs to the same users, each under its own key prefix
 * on one private redis-server (AOF off), so Redis does identical work; the difference
 * is the cost of the Pixiu call path (validation, keys, epoch, reply parsing, per-tick
 * pipelining in src/inbox/tick-pipeline.ts). The work is cut into slices run
 * alternately (raw, inbox, raw, inbox …) so that load from other processes on the
 * machine falls on both paths alike instead of on whichever ran during a busy second.
 *
 * Run: npm run bench:inbox
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { RedisServer } from '../test/harness/redis-server.js';
import { createRedis } from '../src/redis/client.js';
import { encodeMsgId, MsgKind } from '../src/ids/msg-id.js';
import { Inbox } from '../src/inbox/inbox.js';
import { loadRawAppend, runRawAppends } from './lib/raw-inbox.js';
import { perSecond, printConditions, printHeadline, printTable, type Figure } from './lib/report.js';

const USERS = 100_000;
/** Appends per path: every user gets two (the first creates the inbox). */
const APPENDS = 200_000;
const SLICES = 10;
const SLICE = APPENDS / SLICES;
/** Appends in flight at once through `Inbox.append`. */
const IN_FLIGHT = 2_000;
/** Raw: EVALSHA calls per pipeline, and pipelines in flight (the same 2,000 in flight). */
const BATCH = 1_000;
const BATCHES_IN_FLIGHT = IN_FLIGHT / BATCH;
const CAP = 10_000;
/** Appends per path before measuring: JIT, script cache, connection buffers. */
const WARMUP = 20_000;

const ids = Array.from({ length: APPENDS }, (_, i) => encodeMsgId({ partition: 0, kind: MsgKind.user, counter: i + 1 }));
const uids = Array.from({ length: USERS }, (_, i) => `user-${i}`);

function uidOf(i: number): string {
  return uids[i % USERS] ?? '';
}

/** `Inbox.append` for MsgIDs `from` until `to`, at most IN_FLIGHT at once. Returns ms taken. */
async function runInbox(inbox: Inbox, from: number, to: number): Promise<number> {
  let next = from;
  const worker = async (): Promise<void> => {
    while (next < to) {
      const i = next++;
      await inbox.append(uidOf(i), ids[i] ?? '', MsgKind.user);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return performance.now() - start;
}

/** The same script, raw: EVALSHA in plain pipelines of BATCH under `prefix`. Returns ms taken. */
function runRaw(raw: Redis, sha: string, prefix: string, from: number, to: number): Promise<number> {
  return runRawAppends({ raw, sha, prefix, ids, uidOf, from, to, batch: BATCH, pipelinesInFlight: BATCHES_IN_FLIGHT, cap: CAP });
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

function spread(msList: readonly number[]): string {
  const rates = msList.map((ms) => Math.round(perSecond(SLICE, ms)));
  return `slices ${Math.min(...rates)}..${Math.max(...rates)}`;
}

async function main(): Promise<void> {
  const server = await RedisServer.start({ aof: false });
  const redis = await createRedis({ url: server.url, commandTimeoutMs: 30_000, name: 'pixiu:bench' });
  const raw = new Redis(server.url);
  try {
    const sha = await loadRawAppend(raw);
    const version = /redis_version:(\S+)/.exec(await raw.info('server'))?.[1] ?? 'unknown';
    printConditions({
      redis: `${version} (private, AOF off)`,
      users: USERS,
      appends: `${APPENDS} per path in ${SLICES} alternating slices`,
      'in flight': IN_FLIGHT,
      'raw batch': `${BATCH} x ${BATCHES_IN_FLIGHT} pipelines`,
      cap: CAP,
    });

    await runRaw(raw, sha, 'warm-raw:', 0, WARMUP);
    await runInbox(new Inbox(redis, { prefix: 'warm-px:', cap: CAP }), 0, WARMUP);
    await raw.flushall();

    const inbox = new Inbox(redis, { prefix: 'px:', cap: CAP });
    const rawMs: number[] = [];
    const inboxMs: number[] = [];
    for (let s = 0; s < SLICES; s++) {
      rawMs.push(await runRaw(raw, sha, 'raw:', s * SLICE, (s + 1) * SLICE));
      inboxMs.push(await runInbox(inbox, s * SLICE, (s + 1) * SLICE));
    }

    const rawRate = perSecond(APPENDS, sum(rawMs));
    const inboxRate = perSecond(APPENDS, sum(inboxMs));
    const figures: Figure[] = [
      { case: 'raw EVALSHA pipeline (ceiling)', value: rawRate, unit: 'appends/s', note: spread(rawMs) },
      { case: 'Inbox.append (per-tick pipelines)', value: inboxRate, unit: 'appends/s', note: spread(inboxMs) },
      { case: 'Inbox.append mean latency', value: (sum(inboxMs) * IN_FLIGHT) / APPENDS, unit: 'ms', note: `${IN_FLIGHT} in flight (Little's law)` },
    ];
    printTable(figures);
    printHeadline('inbox append', inboxRate, 'appends/s', rawRate);
  } finally {
    raw.disconnect();
    redis.disconnect();
    await server.destroy();
  }
}

await main();
