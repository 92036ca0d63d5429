/**
 * Ingest throughput and latency (DESIGN.md §7): `POST /v1/messages` and
 * `POST /v1/messages/batch` against one `pixiu serve` child process, with its ceilings
 * measured in the same run:
 *
 * - single messages (1 recipient, ~200 bytes of data, a unique client_msg_id each) at
 *   64 connections, against a bare fastify server (also a child process) whose one
 *   route parses the same body and answers 201 with a small JSON body; and, beside
 *   them, the required-work server (bench/lib/required-work.ts): one plain implementation
 *   of the work DESIGN.md requires of such a POST — schema, idempotency lookup, an
 *   fsynced group commit per partition, the append script — which tells Pixiu's own
 *   overhead from the price of the guarantees (not a target's ceiling: a reference);
 * - batches of 100 such messages, against the raw inbox-script rate (the append
 *   script by EVALSHA in plain pipelines, as bench:inbox measures it, to inboxes that
 *   exist already, as the batch case's do): every batched message costs one inbox
 *   append, so that is what a batch cannot beat.
 *
 * - one largest batch (100 messages to 1,000 users each, the default recipient limit),
 *   twice: its request time, and the longest `/healthz` answer while it runs, probed
 *   back to back: how long the server's event loop is held at a stretch by it.
 *
 * The load comes from autocannon in this process; the servers run in their own
 * processes so the load generator does not share their event loop. Each case runs in
 * slices alternating with its ceiling; the ratio rows give the ratio of the totals and,
 * in their note, the spread of the per-round ratios (a slice against its ceiling's
 * slice of the same round), which shows how far load from other processes moved it. The
 * notes also give each case's CPU time per message by process (server, Redis), which
 * other load on the machine hardly moves, and Pixiu's store puts per batch write (each
 * write an fsync of one partition). `BENCH_PARTITIONS=n` runs the server with n store
 * partitions instead of DESIGN.md's default 8. Redis is a private
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
import { cpuMs } from './lib/proc-stats.js';
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
/**
 * Store partitions of the server: DESIGN.md's default 8 unless `BENCH_PARTITIONS` names
 * another count (to measure what the partition split costs single POSTs: each
 * partition fsyncs its own batches, bench/README.md).
 */
const PARTITIONS = process.env.BENCH_PARTITIONS ?? '8';

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

  /** Adds one autocannon result; answers its 2xx count. */
  add(result: autocannon.Result): number {
    this.rates.push(perSecond(result['2xx'], result.duration * 1000));
    this.#ok += result['2xx'];
    this.#seconds += result.duration;
    this.#failed += result.non2xx;
    this.#errors += result.errors;
    this.#p50.push(result.latency.p50);
    this.#p99.push(result.latency.p99);
    return result['2xx'];
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
 * CPU time per message of one case over all its slices, by process (all threads, from
 * /proc): unlike a rate, it hardly moves with the load other processes put on the
 * machine, so it shows what a change costs or saves. Pixiu's slices also count the
 * store's batch writes (from /metrics), each one an fsync per partition written.
 */
class CpuCost {
  readonly #pids: Record<string, number>;
  readonly #ms: Record<string, number> = {};
  #messages = 0;
  #puts = 0;
  #writes = 0;

  /** @param pids the processes to charge, by the name the note gives them */
  constructor(pids: Record<string, number>) {
    this.#pids = pids;
  }

  /**
   * Runs one slice and charges the CPU time each process used meanwhile to the
   * messages it completed.
   * @param slice runs the slice; answers how many messages it completed
   * @param metricsUrl a Pixiu server's base URL, to count its store writes
   */
  async measure(slice: () => Promise<number>, metricsUrl?: string): Promise<void> {
    const names = Object.keys(this.#pids);
    const before = names.map((n) => cpuMs(this.#pids[n] ?? 0));
    const batches = metricsUrl === undefined ? undefined : await storeBatches(metricsUrl);
    this.#messages += await slice();
    names.forEach((n, i) => {
      this.#ms[n] = (this.#ms[n] ?? 0) + cpuMs(this.#pids[n] ?? 0) - (before[i] ?? 0);
    });
    if (metricsUrl !== undefined && batches !== undefined) {
      const after = await storeBatches(metricsUrl);
      this.#puts += after.puts - batches.puts;
      this.#writes += after.writes - batches.writes;
    }
  }

  /** E.g. `CPU per msg: server 171 µs, redis 30 µs; 3.7 puts per store write`. */
  note(unit = 'msg'): string {
    const parts = Object.keys(this.#pids).map((n) => `${n} ${Math.round((1000 * (this.#ms[n] ?? 0)) / Math.max(1, this.#messages))} µs`);
    const writes = this.#writes > 0 ? `; ${(this.#puts / this.#writes).toFixed(1)} puts per store write` : '';
    return `CPU per ${unit}: ${parts.join(', ')}${writes}`;
  }
}

/** The store's batch writes so far, from a Pixiu server's /metrics (`pixiu_store_batch_size`). */
async function storeBatches(url: string): Promise<{ puts: number; writes: number }> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${API_TOKEN}` } })).text();
  const read = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { puts: read('pixiu_store_batch_size_sum'), writes: read('pixiu_store_batch_size_count') };
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

/** The largest batch the default recipient limits take: 100 messages to 1,000 users each (PIXIU_BATCH_MAX_RECIPIENTS); its body needs PIXIU_MAX_BODY_BYTES above the default. */
const LARGE_ITEMS = 100;
const LARGE_TO = 1_000;
const LARGE_RUNS = 2;
/** Gap between two `/healthz` probes while the large batch runs, ms. */
const PROBE_GAP_MS = 5;

/** What one largest batch cost: its request time, and the longest `/healthz` answer meanwhile. */
interface LargeBatch {
  readonly ms: number;
  readonly stallMs: number;
}

/**
 * Posts one largest batch while probing `/healthz` back to back: the longest probe is
 * how long the server's event loop was held at a stretch (every connection's delivery
 * waits as long), the request time what 100,000 inbox appends took.
 * @throws Error when the batch is not answered 200 with every item 201
 */
async function largeBatch(url: string, run: number): Promise<LargeBatch> {
  const body = JSON.stringify({
    messages: Array.from({ length: LARGE_ITEMS }, (_, i) => ({
      to: Array.from({ length: LARGE_TO }, (_, j) => `user-${(i * LARGE_TO + j) % USERS}-${run}`), type: 'chat.text', data: DATA,
    })),
  });
  let probing = true;
  let stallMs = 0;
  const probes = (async () => {
    while (probing) {
      const start = performance.now();
      await fetch(`${url}/healthz`);
      stallMs = Math.max(stallMs, performance.now() - start);
      await new Promise((resolve) => setTimeout(resolve, PROBE_GAP_MS));
    }
  })();
  const start = performance.now();
  const res = await fetch(`${url}/v1/messages/batch`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body });
  const answer = await res.json() as { results?: { status: number }[] };
  const ms = performance.now() - start;
  probing = false;
  await probes;
  const created = answer.results?.filter((r) => r.status === 201).length ?? 0;
  if (res.status !== 200 || created !== LARGE_ITEMS) throw new Error(`largest batch: HTTP ${res.status}, ${created} of ${LARGE_ITEMS} items 201`);
  return { ms, stallMs };
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
      PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info', PIXIU_PARTITIONS: PARTITIONS,
      // The largest batch's body (100,000 recipient ids) is ~1.4 MB: over the default body limit (1 MiB).
      PIXIU_MAX_BODY_BYTES: String(4 * 1024 * 1024),
    }, files);
    const bare = await spawnListening(['bench/lib/bare-fastify.ts'], {}, files, 'bare fastify listening');
    const required = await spawnListening(['bench/lib/required-work.ts'], {
      REQUIRED_WORK_REDIS_URL: redis.url, REQUIRED_WORK_DATA_DIR: await tempDataDir(files, 'pixiu-required-'), REQUIRED_WORK_API_TOKEN: API_TOKEN,
    }, files, 'required work listening');
    const version = /redis_version:(\S+)/.exec(await raw.info('server'))?.[1] ?? 'unknown';
    const singleBytes = JSON.stringify(message('size')).length;
    const batchBody = (tag: string) => () => JSON.stringify({ messages: Array.from({ length: BATCH_SIZE }, () => message(tag)) });
    printConditions({
      redis: `${version} (private, AOF off)`,
      pixiu: `pixiu serve child process, ${SERVE_DESCRIPTION}, store fsync, ${PARTITIONS} partitions`,
      single: `${singleBytes}-byte body, 1 recipient of ${USERS}, unique client_msg_id, ${CONNECTIONS} connections`,
      batch: `${BATCH_SIZE} such messages per request, ${BATCH_CONNECTIONS} connections`,
      'raw inbox': `${RAW_APPENDS} appends, pipelines of ${RAW_BATCH} x ${RAW_PIPELINES}`,
      slices: `${SLICES} x ${SLICE_SECONDS} s per case, alternating with its ceiling`,
    });

    const single = (tag: string) => () => JSON.stringify(message(tag));
    await load(bare.url, '/v1/messages', CONNECTIONS, WARMUP_SECONDS, single('warm-bare'));
    await load(pixiu.url, '/v1/messages', CONNECTIONS, WARMUP_SECONDS, single('warm-single'));
    await load(required.url, '/v1/messages', CONNECTIONS, WARMUP_SECONDS, single('warm-required'));
    await load(pixiu.url, '/v1/messages/batch', BATCH_CONNECTIONS, WARMUP_SECONDS, batchBody('warm-batch'));

    const ids = Array.from({ length: RAW_WARMUP + RAW_APPENDS }, (_, i) => encodeMsgId({ partition: 0, kind: MsgKind.user, counter: i + 1 }));
    const rawRun = { raw, sha: await loadRawAppend(raw), ids, uidOf: (i: number) => `user-${i % USERS}`, batch: RAW_BATCH, pipelinesInFlight: RAW_PIPELINES, cap: CAP };
    // Under the prefix the slices use, over every user: the slices then append to
    // inboxes that exist, as the batch case's appends do (its users were made by the
    // warm-ups above). Before, the slices made 10,000 inboxes, work the batch case did
    // not do, which lowered the ceiling (by more since an inbox's first append also
    // sets its retention, append-13.lua).
    await runRawAppends({ ...rawRun, prefix: 'raw:', from: 0, to: RAW_WARMUP });

    // Each case alternates with its ceiling, slice by slice, so that load from other
    // processes falls on both alike.
    const bareSlices = new Slices();
    const singleSlices = new Slices();
    const requiredSlices = new Slices();
    const batchSlices = new Slices();
    const redisPid = Number(/process_id:(\d+)/.exec(await raw.info('server'))?.[1] ?? 0);
    const pixiuPids = { server: pixiu.proc.pid ?? 0, redis: redisPid };
    const bareCost = new CpuCost({ server: bare.proc.pid ?? 0 });
    const singleCost = new CpuCost(pixiuPids);
    const requiredCost = new CpuCost({ server: required.proc.pid ?? 0, redis: redisPid });
    const rawCost = new CpuCost({ redis: redisPid });
    const batchCost = new CpuCost(pixiuPids);
    let rawMs = 0;
    const rawRates: number[] = [];
    const rawSlice = RAW_APPENDS / SLICES;
    for (let k = 0; k < SLICES; k++) {
      await bareCost.measure(async () => bareSlices.add(await load(bare.url, '/v1/messages', CONNECTIONS, SLICE_SECONDS, single('bare'))));
      await singleCost.measure(async () => singleSlices.add(await load(pixiu.url, '/v1/messages', CONNECTIONS, SLICE_SECONDS, single('single'))), pixiu.url);
      await requiredCost.measure(async () => requiredSlices.add(await load(required.url, '/v1/messages', CONNECTIONS, SLICE_SECONDS, single('required'))));
      const from = RAW_WARMUP + k * rawSlice;
      await rawCost.measure(async () => {
        const ms = await runRawAppends({ ...rawRun, prefix: 'raw:', from, to: from + rawSlice });
        rawMs += ms;
        rawRates.push(perSecond(rawSlice, ms));
        return rawSlice;
      });
      await batchCost.measure(async () => BATCH_SIZE * batchSlices.add(await load(pixiu.url, '/v1/messages/batch', BATCH_CONNECTIONS, SLICE_SECONDS, batchBody('batch'))), pixiu.url);
    }
    const large: LargeBatch[] = [];
    for (let run = 0; run < LARGE_RUNS; run++) large.push(await largeBatch(pixiu.url, run));
    const bareRun = bareSlices.run;
    const singleRun = singleSlices.run;
    const requiredRun = requiredSlices.run;
    const batchRun = batchSlices.run;
    const rawRate = perSecond(RAW_APPENDS, rawMs);
    const batchRate = batchRun.rate * BATCH_SIZE;

    const figures: Figure[] = [
      { case: 'bare fastify route, single (ceiling)', value: bareRun.rate, unit: 'req/s', note: `p50 ${bareRun.p50} ms, p99 ${bareRun.p99} ms${bareRun.failures}; ${bareCost.note('req')}` },
      { case: 'POST /v1/messages, single message', value: singleRun.rate, unit: 'msg/s', note: `p50 ${singleRun.p50} ms, p99 ${singleRun.p99} ms${singleRun.failures}; ${singleCost.note()}` },
      { case: 'single / bare ceiling (target >= 0.4)', value: singleRun.rate / bareRun.rate, unit: 'ratio', note: sliceRatios(singleSlices.rates, bareSlices.rates) },
      { case: 'the required work alone, single (reference)', value: requiredRun.rate, unit: 'msg/s', note: `p50 ${requiredRun.p50} ms, p99 ${requiredRun.p99} ms${requiredRun.failures}; ${requiredCost.note()}` },
      { case: 'required work / bare ceiling (reference)', value: requiredRun.rate / bareRun.rate, unit: 'ratio', note: sliceRatios(requiredSlices.rates, bareSlices.rates) },
      { case: 'raw inbox script, EVALSHA pipelines (ceiling)', value: rawRate, unit: 'appends/s', note: rawCost.note('append') },
      { case: `POST /v1/messages/batch of ${BATCH_SIZE}`, value: batchRate, unit: 'msg/s', note: `${Math.round(batchRun.rate)} req/s, per request p50 ${batchRun.p50} ms, p99 ${batchRun.p99} ms${batchRun.failures}; ${batchCost.note()}` },
      { case: 'batch / raw inbox ceiling (target >= 0.6)', value: batchRate / rawRate, unit: 'ratio', note: sliceRatios(batchSlices.rates.map((r) => r * BATCH_SIZE), rawRates) },
      { case: `largest batch (${LARGE_ITEMS} x ${LARGE_TO} recipients)`, value: median(large.map((l) => l.ms)), unit: 'ms', note: `median of ${LARGE_RUNS}: ${large.map((l) => Math.round(l.ms)).join(', ')} ms` },
      { case: 'longest /healthz answer during it', value: Math.max(...large.map((l) => l.stallMs)), unit: 'ms', note: `probed every ${PROBE_GAP_MS} ms; per run ${large.map((l) => Math.round(l.stallMs)).join(', ')} ms (the event loop held at a stretch)` },
    ];
    printTable(figures);
    printHeadline('ingest single message', singleRun.rate, 'msg/s', bareRun.rate);
  } finally {
    await files.run();
  }
}

await main();
