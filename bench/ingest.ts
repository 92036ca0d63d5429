/**
 * Ingest throughput and latency (DESIGN.md §7): `POST /v1/messages` and
 * `POST /v1/messages/batch` against one `pixiu serve` child process, with its ceilings
 * measured in the same run:
 *
 * - single messages (1 recipient, ~200 bytes of data, a unique client_msg_id each) at
 *   64 connections, against a bare fastify server (also a child process) whose one
 *   route parses the same body and answers 201 with a small JSON body;
 * - batches of 100 such messages, against the raw inbox-script rate (the append
 *   script by EVALSHA in plain pipelines, as bench:inbox measures it): every batched
 *   message costs one inbox append, so that is what a batch cannot beat.
 *
 * The load comes from autocannon in this process; the servers run in their own
 * processes so the load generator does not share their event loop. Each case runs in
 * slices alternating with its ceiling; the ratio rows give the ratio of the totals and,
 * in their note, the spread of the per-round ratios (a slice against its ceiling's
 * slice of the same round), which shows how far load from other processes moved it. Redis is a private
 * redis-server from the test harness with AOF off; the store is fsynced (the default
 * durability).
 *
 * Run: npm run bench:ingest
 */
import autocannon from 'autocannon';
import { MESSAGE_TEXT } from './lib/message-text.js';
import { Redis } from 'ioredis';
import { encodeMsgId, MsgKind } from '../src/ids/msg-id.js';
import { RedisServer } from '../test/harness/redis-server.js';
import { cleanupList, spawnListening, tempDataDir } from '../test/harness/pixiu-server.js';
import { buildServe, SERVE_DESCRIPTION, spawnCompiledServe } from './lib/serve-flags.js';
import { loadRawAppend, runRawAppends } from './lib/raw-inbox.js';
import { perSecond, printConditions, printHeadline, printTable, type Figure } from './lib/report.js';

const CONNECTIONS = 64;
/** Each case runs SLICES × SLICE_SECONDS, alternating with its ceiling. */
const SLICES = 5;
const SLICE_SECONDS = 2;
const WARMUP_SECONDS = 2;
const BATCH_SIZE = 100;
/** Connections for batches: 16 × 100 = 1,600 messages in flight. */
const BATCH_CONNECTIONS = 16;
/** Recipients are spread over this many users. */
const USERS = 10_000;
const API_TOKEN = 'bench-ingest-api-token-0123456789';
/** Raw appends for the batch ceiling (in SLICES slices), and the raw pipelines' shape (bench:inbox's). */
const RAW_APPENDS = 100_000;
const RAW_WARMUP = 20_000;
const RAW_BATCH = 1_000;
const RAW_PIPELINES = 2;
const CAP = 10_000;

const DATA = { text: MESSAGE_TEXT, n: 1 };
let sent = 0;

/** One message body, each with a new client_msg_id and the next recipient. */
function message(tag: string): Record<string, unknown> {
  const n = sent++;
  return { to: `user-${n % USERS}`, type: 'chat.text', data: DATA, client_msg_id: `${tag}-${n}` };
}

/** What the slices of one case gave, per request. */
interface Run {
  /** 2xx answers per second over all slices. */
  readonly rate: number;
  /** Median over the slices of each slice's p50 and p99 latency, ms. */
  readonly p50: number;
  readonly p99: number;
  /** Non-2xx answers and connection errors, for the notes. */
  readonly failures: string;
}

/** Slices of one case, gathered. */
class Slices {
  #ok = 0;
  #seconds = 0;
  #failed = 0;
  #errors = 0;
  readonly #p50: number[] = [];
  readonly #p99: number[] = [];
  /** Each slice's 2xx answers per second, in order. */
  readonly rates: number[] = [];

  /** Adds one autocannon result. */
  add(result: autocannon.Result): void {
    this.rates.push(perSecond(result['2xx'], result.duration * 1000));
    this.#ok += result['2xx'];
    this.#seconds += result.duration;
    this.#failed += result.non2xx;
    this.#errors += result.errors;
    this.#p50.push(result.latency.p50);
    this.#p99.push(result.latency.p99);
  }

  get run(): Run {
    return {
      rate: perSecond(this.#ok, this.#seconds * 1000),
      p50: median(this.#p50),
      p99: median(this.#p99),
      failures: this.#failed + this.#errors === 0 ? '' : `, ${this.#failed} non-2xx and ${this.#errors} errors`,
    };
  }
}

/**
 * The ratio of each slice to its ceiling's slice of the same round, as `min – max
 * (median m)`: how far load from other processes moved the ratio from round to round.
 */
function sliceRatios(values: readonly number[], ceilings: readonly number[]): string {
  const ratios = values.map((v, i) => v / (ceilings[i] ?? Number.NaN)).filter(Number.isFinite);
  const fmt = (r: number): string => r.toFixed(2);
  return `per-round ratios ${fmt(Math.min(...ratios))} – ${fmt(Math.max(...ratios))} (median ${fmt(median(ratios))})`;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/**
 * Posts bodies from `body()` to `url` + `route` on `connections` connections for
 * `seconds`.
 */
function load(url: string, route: string, connections: number, seconds: number, body: () => string): Promise<autocannon.Result> {
  return autocannon({
    url: `${url}${route}`,
    connections,
    duration: seconds,
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    requests: [{ setupRequest: (req) => ({ ...req, body: body() }) }],
  });
}

async function main(): Promise<void> {
  buildServe();
  const files = cleanupList();
  const redis = await RedisServer.start({ aof: false });
  // Registered first, so it runs last, and runs even when an earlier step fails.
  files.after(() => redis.destroy());
  const raw = new Redis(redis.url);
  files.after(() => raw.disconnect());
  try {
    const pixiu = await spawnCompiledServe([], {
      PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(files, 'pixiu-bench-'), PIXIU_PORT: '0',
      PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info',
    }, files);
    const bare = await spawnListening(['bench/lib/bare-fastify.ts'], {}, files, 'bare fastify listening');
    const version = /redis_version:(\S+)/.exec(await raw.info('server'))?.[1] ?? 'unknown';
    const singleBytes = JSON.stringify(message('size')).length;
    const batchBody = (tag: string) => () => JSON.stringify({ messages: Array.from({ length: BATCH_SIZE }, () => message(tag)) });
    printConditions({
      redis: `${version} (private, AOF off)`,
      pixiu: `pixiu serve child process, ${SERVE_DESCRIPTION}, store fsync, 8 partitions`,
      single: `${singleBytes}-byte body, 1 recipient of ${USERS}, unique client_msg_id, ${CONNECTIONS} connections`,
      batch: `${BATCH_SIZE} such messages per request, ${BATCH_CONNECTIONS} connections`,
      'raw inbox': `${RAW_APPENDS} appends, pipelines of ${RAW_BATCH} x ${RAW_PIPELINES}`,
      slices: `${SLICES} x ${SLICE_SECONDS} s per case, alternating with its ceiling`,
    });

    const single = (tag: string) => () => JSON.stringify(message(tag));
    await load(bare.url, '/v1/messages', CONNECTIONS, WARMUP_SECONDS, single('warm-bare'));
    await load(pixiu.url, '/v1/messages', CONNECTIONS, WARMUP_SECONDS, single('warm-single'));
    await load(pixiu.url, '/v1/messages/batch', BATCH_CONNECTIONS, WARMUP_SECONDS, batchBody('warm-batch'));

    const ids = Array.from({ length: RAW_WARMUP + RAW_APPENDS }, (_, i) => encodeMsgId({ partition: 0, kind: MsgKind.user, counter: i + 1 }));
    const rawRun = { raw, sha: await loadRawAppend(raw), ids, uidOf: (i: number) => `user-${i % USERS}`, batch: RAW_BATCH, pipelinesInFlight: RAW_PIPELINES, cap: CAP };
    await runRawAppends({ ...rawRun, prefix: 'warm-raw:', from: 0, to: RAW_WARMUP });

    // Each case alternates with its ceiling, slice by slice, so that load from other
    // processes falls on both alike.
    const bareSlices = new Slices();
    const singleSlices = new Slices();
    const batchSlices = new Slices();
    let rawMs = 0;
    const rawRates: number[] = [];
    const rawSlice = RAW_APPENDS / SLICES;
    for (let k = 0; k < SLICES; k++) {
      bareSlices.add(await load(bare.url, '/v1/messages', CONNECTIONS, SLICE_SECONDS, single('bare')));
      singleSlices.add(await load(pixiu.url, '/v1/messages', CONNECTIONS, SLICE_SECONDS, single('single')));
      const from = RAW_WARMUP + k * rawSlice;
      const ms = await runRawAppends({ ...rawRun, prefix: 'raw:', from, to: from + rawSlice });
      rawMs += ms;
      rawRates.push(perSecond(rawSlice, ms));
      batchSlices.add(await load(pixiu.url, '/v1/messages/batch', BATCH_CONNECTIONS, SLICE_SECONDS, batchBody('batch')));
    }
    const bareRun = bareSlices.run;
    const singleRun = singleSlices.run;
    const batchRun = batchSlices.run;
    const rawRate = perSecond(RAW_APPENDS, rawMs);
    const batchRate = batchRun.rate * BATCH_SIZE;

    const figures: Figure[] = [
      { case: 'bare fastify route, single (ceiling)', value: bareRun.rate, unit: 'req/s', note: `p50 ${bareRun.p50} ms, p99 ${bareRun.p99} ms${bareRun.failures}` },
      { case: 'POST /v1/messages, single message', value: singleRun.rate, unit: 'msg/s', note: `p50 ${singleRun.p50} ms, p99 ${singleRun.p99} ms${singleRun.failures}` },
      { case: 'single / bare ceiling (target >= 0.4)', value: singleRun.rate / bareRun.rate, unit: 'ratio', note: sliceRatios(singleSlices.rates, bareSlices.rates) },
      { case: 'raw inbox script, EVALSHA pipelines (ceiling)', value: rawRate, unit: 'appends/s' },
      { case: `POST /v1/messages/batch of ${BATCH_SIZE}`, value: batchRate, unit: 'msg/s', note: `${Math.round(batchRun.rate)} req/s, per request p50 ${batchRun.p50} ms, p99 ${batchRun.p99} ms${batchRun.failures}` },
      { case: 'batch / raw inbox ceiling (target >= 0.6)', value: batchRate / rawRate, unit: 'ratio', note: sliceRatios(batchSlices.rates.map((r) => r * BATCH_SIZE), rawRates) },
    ];
    printTable(figures);
    printHeadline('ingest single message', singleRun.rate, 'msg/s', bareRun.rate);
  } finally {
    await files.run();
  }
}

await main();
