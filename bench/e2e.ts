/**
 * End-to-end delivery (issue 4's Benchmark; DESIGN.md §5–§6): a `pixiu serve` child
 * process, and a load process (bench/lib/e2e-load.ts: WebSocket clients and HTTP
 * producers, its own child process, so it shares no event loop with a server) driven
 * from here. Redis is a private redis-server from the test harness with AOF off; the
 * store is fsynced (the default durability); every Pixiu setting is its default.
 *
 * (c) Memory per idle connection, first, on the fresh server: 10,000 idle connections
 *     (one user each); the server's RSS and heap used from its own /metrics after a
 *     full GC (the server runs with --expose-gc in NODE_OPTIONS and a bench-only
 *     preload, bench/lib/gc-hook.mjs, that collects on SIGUSR2), before and after,
 *     divided by the count. The bare relay below is measured the same way (from the
 *     hook's line: it has no /metrics), as the floor of Node + `ws`.
 * (a) Live delivery: 2,000 connected users (one device each, acking every msg);
 *     producers POST single messages to random users at a fixed, open-loop rate; the
 *     latency runs from the POST's send time (in `data`) to the client's receipt. The
 *     highest sustainable rate is found by a short search (bench/lib/rate-search.ts;
 *     a failed step is tried once more before it counts, as one burst of load from
 *     other processes can fail a step) and confirmed over a longer measured step
 *     (4 s, lowered by 15 % while that fails, at most twice); then 25 % and 50 % of it
 *     are measured over 15 s each (see LATENCY_SECONDS). The ceiling is a bare `ws` relay (bench/lib/bare-ws-relay.ts, a
 *     child process) taking the same POSTs and pushing the same frames to the same
 *     number of clients of the same load process: searched and measured the same way,
 *     alternating with Pixiu step by step so that load from other processes falls on
 *     both alike. Headline and ceiling are each the most delivered in a sustainable
 *     step. Each step prints the CPU use of the server, Redis and the load process,
 *     how long each waited for a CPU (other work on the machine), Pixiu's
 *     event-loop delay, and its store batch writes (fsync included) over 25 and 100 ms:
 *     one such write holds every message of its partition however idle the loop is.
 * (b) Catch-up: one device with a backlog of 10,000 messages (posted first, in
 *     batches) connects with no last_seq and acks every msg as it comes (window 100):
 *     time from the connect call to the receipt of the last. Three users, one each,
 *     after a warm-up catch-up of 1,000; every backlog is posted before the first.
 *
 * Environment: BENCH_E2E_CASES (default `c,a,b`) runs a subset; BENCH_E2E_CPU_PROF=<dir>
 * runs the server with --cpu-prof into that dir (written at its graceful exit);
 * BENCH_E2E_ALLOC_PROF=<file> writes where the server allocated, collected objects
 * included, as a .heapprofile (bench/lib/alloc-prof.mjs; also at its graceful exit);
 * BENCH_E2E_SERVER_ENV='{"PIXIU_STORE_DURABILITY":"relaxed"}' (a JSON object) adds
 * environment variables to the server's, to compare settings; BENCH_E2E_TRACE_MS=<ms> makes
 * the load process print, after each step of (a), the spells of messages slower than
 * that (when they were sent, how long the spell lasted, the worst latency), to line
 * them up with the server's GC or event-loop stalls; BENCH_E2E_FIXED=<rate>x<steps> makes case (a)
 * measure only Pixiu, at that rate, in that many 15 s steps (to compare settings at one rate).
 *
 * Run: npm run bench:e2e
 */
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { RedisServer } from '../test/harness/redis-server.js';
import { waitUntil } from '../test/harness/checks.js';
import { PixiuClient, REPO_ROOT, cleanupList, spawnListening, tempDataDir, type ServeProcess } from '../test/harness/pixiu-server.js';
import { MESSAGE_TEXT } from './lib/message-text.js';
import type { StepResult, TargetKind } from './lib/e2e-protocol.js';
import { LoadProcess } from './lib/load-process.js';
import { buildServe, SERVE_DESCRIPTION, spawnCompiledServe } from './lib/serve-flags.js';
import { CpuMeter } from './lib/proc-stats.js';
import { CRITERION, GRACE_MS, RateSearch, judge, roundRate } from './lib/rate-search.js';
import { perSecond, printConditions, printHeadline, printTable, type Figure } from './lib/report.js';

const API_TOKEN = 'bench-e2e-api-token-0123456789';
const JWT_SECRET = 'bench-e2e-jwt-secret-0123456789abcdef0123456789';
const LIVE_USERS = 2000;
const IDLE_CONNECTIONS = 10_000;
const BACKLOG = 10_000;
const CATCHUP_RUNS = 3;
/** Handshakes in flight while connecting a pool. */
const CONNECT_CONCURRENCY = 100;
/** First rates of the searches, msg/s. */
const SEARCH_START: Record<TargetKind, number> = { pixiu: 1000, bare: 2000 };
const SEARCH_SECONDS = 2.5;
/** Measured steps at 100 % of the sustainable rate (its confirmation). */
const MEASURE_SECONDS = 4;
/**
 * Measured steps at 25 and 50 %, whose latency percentiles are the figures. In a 4 s
 * step, 1 % of the messages is 40 ms of traffic, so its p99 was the length of the one
 * pause (a full GC of the server or of the load process, a burst of other work on the
 * two cores) that happened to fall in it: 6.7 to 34 ms from one run to the next at the
 * same rate. Over 15 s such a pause weighs on the p999, which is printed too.
 */
const LATENCY_SECONDS = 15;
const LEVELS = [0.25, 0.5, 1] as const;
/** Times the search's best rate is lowered by 15 % when a measured step at it fails. */
const CONFIRM_STEP_DOWNS = 2;
const WARMUP = { rate: 500, seconds: 2 };
/** prom-client's event-loop delay sampling interval (its `eventLoopMonitoringPrecision` default), ms. */
const LOOP_SAMPLE_MS = 10;
const GC_HOOK = path.join(REPO_ROOT, 'bench/lib/gc-hook.mjs');
const ALLOC_PROF = path.join(REPO_ROOT, 'bench/lib/alloc-prof.mjs');
const TARGETS = ['pixiu', 'bare'] as const;

const cases = new Set((process.env.BENCH_E2E_CASES ?? 'c,a,b').split(',').map((s) => s.trim()));
const cpuProfDir = process.env.BENCH_E2E_CPU_PROF;
const allocProfFile = process.env.BENCH_E2E_ALLOC_PROF;
/** BENCH_E2E_FIXED=<rate>x<steps>: case (a) only measures Pixiu at one rate, `steps` steps of LATENCY_SECONDS. */
const fixed = ((m) => m ? { rate: Number(m[1]), steps: Number(m[2]) } : undefined)(/^(\d+)x(\d+)$/.exec(process.env.BENCH_E2E_FIXED ?? ''));

/** One measured step, judged, with the CPU use of the processes during it. */
interface Step {
  readonly target: TargetKind;
  readonly r: StepResult;
  /** % of one core: `server` (Pixiu or the relay), `redis`, `load`. */
  readonly cpu: Record<string, number>;
  /** % of the step each main thread was runnable but waiting for a CPU (other work on the machine). */
  readonly wait: Record<string, number>;
  /** Pixiu only: its event-loop delay during the step beyond prom-client's 10 ms sampling interval (from /metrics), ms. */
  readonly loopDelay?: { readonly p99: number; readonly max: number };
  /**
   * Pixiu only: its store batch writes (fsync included) during the step that took over
   * 25 ms and over 100 ms (from /metrics): a write that slow holds every message of its
   * partition, however idle the event loop.
   */
  readonly slowWrites?: { readonly over25: number; readonly over100: number };
  readonly ok: boolean;
  readonly why: string;
}

/** Memory of a server after a full GC, bytes. */
interface Memory {
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
}

const fmt = (n: number, digits = 1): string => n.toLocaleString('en-US', { maximumFractionDigits: digits });
const MiB = (bytes: number): string => fmt(bytes / 2 ** 20);
const loadavg = (): string => os.loadavg().map((l) => l.toFixed(2)).join(' ');
const deliveredPerSecond = (s: Step): number => s.r.deliveredInWindow / s.r.seconds;

/** The line of CPU use of a step, with the server's CPU time per delivered message. */
function cpuNote(s: Step): string {
  const perMsg = s.r.deliveredTotal > 0 ? ((s.cpu.server ?? 0) / 100) * s.r.wallMs * 1000 / s.r.deliveredTotal : 0;
  const list = (use: Record<string, number>): string => Object.entries(use).map(([k, v]) => `${k} ${Math.round(v)}%`).join(', ');
  const loop = s.loopDelay ? `; server event-loop delay p99 ${fmt(s.loopDelay.p99, 1)} ms, max ${fmt(s.loopDelay.max, 1)} ms` : '';
  const writes = s.slowWrites ? `; store writes over 25 ms: ${s.slowWrites.over25} (over 100 ms: ${s.slowWrites.over100})` : '';
  return `CPU ${list(s.cpu)}; server ${fmt(perMsg, 0)} us CPU/msg; waiting for a CPU ${list(s.wait)}${loop}${writes}`;
}

/** A gauge of the Prometheus text. */
function gauge(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
}

/** Store batch writes that took longer than `le` seconds, from the duration histogram's buckets. */
function writesOver(text: string, le: string): number {
  const bucket = (bound: string): number =>
    Number(new RegExp(`^pixiu_store_batch_duration_seconds_bucket\\{le="${bound.replace('+', '\\+')}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return bucket('+Inf') - bucket(le);
}

async function pixiuMetrics(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

/**
 * Asks a server's gc hook for two full collections and resolves with the hook's line
 * (its `process.memoryUsage()` right after).
 */
async function gcSettle(server: ServeProcess): Promise<Memory & { exposed: boolean }> {
  const lines = (): string[] => server.stdout().split('\n').filter((l) => l.includes('"bench gc done"'));
  const before = lines().length;
  server.proc.kill('SIGUSR2');
  await waitUntil('the server gc hook', async () => lines().length > before, 10_000, 20);
  const line = JSON.parse(lines()[lines().length - 1] ?? '{}') as Memory & { exposed: boolean };
  if (!line.exposed) throw new Error('the server runs without --expose-gc');
  return line;
}

async function main(): Promise<void> {
  buildServe();
  const began = performance.now();
  const loadAtStart = loadavg();
  const files = cleanupList();
  const redis = await RedisServer.start({ aof: false });
  files.after(() => redis.destroy());
  const raw = new Redis(redis.url);
  files.after(() => raw.disconnect());
  // Redis records every event (command, fork, AOF fsync…) over 20 ms: printed at the
  // end, it tells whether a latency pause of the run was Redis's.
  await raw.config('SET', 'latency-monitor-threshold', '20');
  try {
    // --cpu-prof is not allowed in NODE_OPTIONS: it goes with the node arguments.
    const profArgs = [
      ...(cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`] : []),
      ...(allocProfFile ? ['--import', ALLOC_PROF] : []),
    ];
    const pixiu = await spawnCompiledServe([...profArgs, '--import', GC_HOOK], {
      PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(files, 'pixiu-bench-'), PIXIU_PORT: '0',
      PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info', NODE_OPTIONS: '--expose-gc',
      ...(allocProfFile ? { BENCH_ALLOC_PROF_FILE: path.resolve(allocProfFile) } : {}), ...JSON.parse(process.env.BENCH_E2E_SERVER_ENV ?? '{}') as Record<string, string>,
    }, files);
    const bare = await spawnListening(['--import', GC_HOOK, 'bench/lib/bare-ws-relay.ts'], { NODE_OPTIONS: '--expose-gc' }, files, 'bare ws relay listening');
    const servers: Record<TargetKind, ServeProcess> = { pixiu, bare };
    const load = LoadProcess.start(files);
    const info = await raw.info('server');
    const redisPid = Number(/process_id:(\d+)/.exec(info)?.[1] ?? 0);
    printConditions({
      'load average at start': loadAtStart,
      redis: `${/redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown'} (private, AOF off)`,
      pixiu: `pixiu serve child process, ${SERVE_DESCRIPTION}, default settings (store fsync, 8 partitions, window 100)${cpuProfDir ? ', --cpu-prof' : ''}${allocProfFile ? ', allocation profile' : ''}`,
      load: 'one child process: ws clients (one device per user, ack per msg) + node:http producers (64 keep-alive connections, open loop), '
        + 'single messages without client_msg_id, ~250-byte bodies',
    });
    console.log(`criterion: ${CRITERION}`);
    const figures: Figure[] = [];
    let headline: { value: number; limit: number } | undefined;
    const connect = (target: TargetKind, pool: string, prefix: string, count: number) => load.request({
      op: 'connect', pool, kind: target, url: servers[target].url, prefix, count, concurrency: CONNECT_CONCURRENCY, jwtSecret: JWT_SECRET,
    });

    if (cases.has('c')) {
      const idle: Partial<Record<TargetKind, { n: number; before: Memory; after: Memory }>> = {};
      for (const target of TARGETS) {
        const server = servers[target];
        const memory = async (): Promise<Memory> => {
          const hook = await gcSettle(server);
          if (target === 'bare') return hook;
          const text = await pixiuMetrics(pixiu.url);
          return { rss: gauge(text, 'pixiu_process_resident_memory_bytes'), heapUsed: gauge(text, 'pixiu_nodejs_heap_size_used_bytes'), heapTotal: gauge(text, 'pixiu_nodejs_heap_size_total_bytes') };
        };
        const serverCounts = async (n: number): Promise<void> => {
          if (target === 'pixiu') await waitUntil(`${n} connections on the server`, async () => gauge(await pixiuMetrics(pixiu.url), 'pixiu_ws_connections') === n, 10_000, 20);
        };
        // A few connections first, so that the code paths are compiled before the baseline.
        await connect(target, 'warm', 'warm-', 200);
        await load.request({ op: 'close', pool: 'warm' });
        await serverCounts(0);
        const before = await memory();
        const opened = await connect(target, 'idle', 'idle-', IDLE_CONNECTIONS);
        await serverCounts(opened.opened);
        const after = await memory();
        await load.request({ op: 'close', pool: 'idle' });
        idle[target] = { n: opened.opened, before, after };
        console.log(`[c] ${target}: ${opened.opened} idle connections opened in ${fmt(opened.ms / 1000, 2)} s (${fmt(perSecond(opened.opened, opened.ms), 0)}/s)`
          + `${opened.failed ? `, ${opened.failed} failed: ${opened.firstError ?? ''}` : ''}; RSS ${MiB(before.rss)} -> ${MiB(after.rss)} MiB, `
          + `heap used ${MiB(before.heapUsed)} -> ${MiB(after.heapUsed)} MiB, heap total ${MiB(before.heapTotal)} -> ${MiB(after.heapTotal)} MiB`);
      }
      const per = (t: TargetKind, k: keyof Memory): number => {
        const m = idle[t];
        return m && m.n > 0 ? (m.after[k] - m.before[k]) / m.n / 1024 : 0;
      };
      const note = (t: TargetKind): string => `${fmt(idle[t]?.n ?? 0, 0)} connections after a full GC; heap total +${fmt(per(t, 'heapTotal'), 2)} KiB/conn`;
      figures.push(
        { case: '(c) pixiu RSS per idle connection (target <= 12 KiB)', value: per('pixiu', 'rss'), unit: 'KiB', note: note('pixiu') },
        { case: '(c) pixiu heap used per idle connection (target <= 12 KiB)', value: per('pixiu', 'heapUsed'), unit: 'KiB', note: 'from /metrics' },
        { case: '(c) bare ws relay RSS per idle connection (floor)', value: per('bare', 'rss'), unit: 'KiB', note: note('bare') },
        { case: '(c) bare ws relay heap used per idle connection (floor)', value: per('bare', 'heapUsed'), unit: 'KiB', note: 'from process.memoryUsage()' },
      );
    }

    if (cases.has('a')) {
      const postUrl: Record<TargetKind, string> = { pixiu: `${pixiu.url}/v1/messages`, bare: `${bare.url}/v1/messages` };
      for (const target of TARGETS) {
        const c = await connect(target, target, 'live-', LIVE_USERS);
        if (c.failed > 0) throw new Error(`${c.failed} of ${LIVE_USERS} ${target} connections failed: ${c.firstError ?? ''}`);
        console.log(`[a] ${LIVE_USERS} ${target} clients connected in ${fmt(c.ms / 1000, 2)} s`);
      }
      const steps: Step[] = [];
      const runStep = async (target: TargetKind, rate: number, seconds: number, label: string): Promise<Step> => {
        const meter = new CpuMeter({ server: servers[target].proc.pid ?? 0, redis: redisPid, load: load.pid });
        // prom-client's event-loop delay histogram restarts at each scrape: this one starts the step's.
        const before = target === 'pixiu' ? await pixiuMetrics(pixiu.url) : undefined;
        meter.start();
        const r = await load.request({ op: 'step', pool: target, postUrl: postUrl[target], apiToken: API_TOKEN, rate, seconds, graceMs: GRACE_MS });
        const use = meter.stop();
        const text = target === 'pixiu' ? await pixiuMetrics(pixiu.url) : undefined;
        // monitorEventLoopDelay's samples include its interval (prom-client's default 10 ms): an idle loop reads ~10.1 ms.
        const lag = (name: string): number => Math.max(0, gauge(text ?? '', name) * 1000 - LOOP_SAMPLE_MS);
        const loopDelay = text === undefined ? undefined
          : { p99: lag('pixiu_nodejs_eventloop_lag_p99_seconds'), max: lag('pixiu_nodejs_eventloop_lag_max_seconds') };
        const slowWrites = text === undefined || before === undefined ? undefined : {
          over25: writesOver(text, '0.025') - writesOver(before, '0.025'),
          over100: writesOver(text, '0.1') - writesOver(before, '0.1'),
        };
        const step: Step = { target, r, ...use, ...(loopDelay ? { loopDelay, slowWrites } : {}), ...judge(r) };
        steps.push(step);
        console.log(`[a] ${label.padEnd(7)} ${target.padEnd(5)} ${fmt(rate, 0).padStart(6)} msg/s offered: delivered ${fmt(deliveredPerSecond(step), 0)}/s, `
          + `p50/p99/p999 ${fmt(r.latency.p50, 2)}/${fmt(r.latency.p99, 2)}/${fmt(r.latency.p999, 2)} ms, ${cpuNote(step)}: `
          + `${step.ok ? 'sustainable' : `not sustainable (${step.why})`}`);
        return step;
      };
      for (const target of TARGETS) await runStep(target, WARMUP.rate, WARMUP.seconds, 'warm-up');
      if (fixed) {
        // Settings compared at one rate (e.g. the last full run's 50 %): no search, no relay.
        for (let i = 1; i <= fixed.steps; i++) {
          const s = await runStep('pixiu', fixed.rate, LATENCY_SECONDS, `fixed ${i}`);
          figures.push({ case: `(a) pixiu @ ${fmt(fixed.rate, 0)} msg/s, step ${i}: p99`, value: s.r.latency.p99, unit: 'ms', note: cpuNote(s) });
        }
      }

      // The two searches alternate step by step; a failed step is tried once more.
      if (!fixed) {
        const searches: Record<TargetKind, RateSearch> = { pixiu: new RateSearch(SEARCH_START.pixiu), bare: new RateSearch(SEARCH_START.bare) };
        for (let more = true; more;) {
          more = false;
          for (const target of TARGETS) {
            const rate = searches[target].next();
            if (rate === undefined) continue;
            more = true;
            const first = await runStep(target, rate, SEARCH_SECONDS, 'search');
            const ok = first.ok || (await runStep(target, rate, SEARCH_SECONDS, 'retry')).ok;
            searches[target].record(rate, ok, first.ok ? '' : ' (retried)');
          }
        }
        const row = (s: Step, label: string): Figure => ({
          case: label, value: deliveredPerSecond(s), unit: 'msg/s',
          note: `p50/p99/p999 ${fmt(s.r.latency.p50, 2)} / ${fmt(s.r.latency.p99, 2)} / ${fmt(s.r.latency.p999, 2)} ms; ${cpuNote(s)}${s.ok ? '' : `; NOT sustainable: ${s.why}`}`,
        });
        // The search's steps are short: its best rate is confirmed over a measured step,
        // 15 % lower each time it fails (at most twice). The confirmed rate is the 100 %.
        const confirmed: string[] = [];
        let atMax: Step | undefined;
        let pmax = searches.pixiu.max;
        for (let tries = 0; pmax > 0 && tries <= CONFIRM_STEP_DOWNS; tries++) {
          atMax = await runStep('pixiu', pmax, MEASURE_SECONDS, tries === 0 ? '100%' : 'lower');
          confirmed.push(`${fmt(pmax, 0)} ${atMax.ok ? 'ok' : 'no'}`);
          if (atMax.ok || tries === CONFIRM_STEP_DOWNS) break;
          pmax = roundRate(pmax * 0.85);
        }
        const bmax = searches.bare.max;
        figures.push(
          { case: '(a) highest sustainable rate, pixiu', value: pmax, unit: 'msg/s', note: `search ${searches.pixiu.tried.join(', ')}; over ${MEASURE_SECONDS} s ${confirmed.join(', ')}` },
          { case: '(a) highest sustainable rate, bare ws relay (search)', value: bmax, unit: 'msg/s', note: searches.bare.tried.join(', ') },
        );
        let atHalf: Step | undefined;
        if (atMax) {
          for (const level of LEVELS) {
            const rate = roundRate(level * pmax);
            const seconds = level === 1 ? MEASURE_SECONDS : LATENCY_SECONDS;
            const p = level === 1 ? atMax : await runStep('pixiu', rate, seconds, `${level * 100}%`);
            const b = await runStep('bare', rate, seconds, `${level * 100}%`);
            figures.push(row(p, `(a) pixiu @ ${level * 100}% (${fmt(rate, 0)} msg/s offered)`), row(b, `(a) bare ws relay @ the same ${fmt(rate, 0)} msg/s`));
            if (level === 0.5) atHalf = p;
          }
        }
        if (bmax > 0) figures.push(row(await runStep('bare', bmax, MEASURE_SECONDS, 'max'), `(a) bare ws relay @ its max (${fmt(bmax, 0)} msg/s offered)`));
        // Headline and ceiling by one rule: the most each delivered in a sustainable step
        // (search, confirmation or measure). Load from other processes comes in bursts, and
        // this keeps one side's unlucky step from setting the ratio.
        const best = (target: TargetKind): number => steps.filter((s) => s.target === target && s.ok).reduce((m, s) => Math.max(m, deliveredPerSecond(s)), 0);
        headline = { value: best('pixiu'), limit: best('bare') };
        figures.push(
          { case: '(a) pixiu, best sustainable step (headline)', value: headline.value, unit: 'msg/s' },
          { case: '(a) ceiling: bare ws relay, best sustainable step', value: headline.limit, unit: 'msg/s' },
          { case: '(a) ratio pixiu / ceiling (target >= 0.3)', value: headline.limit > 0 ? headline.value / headline.limit : 0, unit: 'ratio' },
          { case: '(a) p99 at 50% of the sustainable rate (target <= 20 ms)', value: atHalf?.r.latency.p99 ?? 0, unit: 'ms' },
        );
      }
      await load.request({ op: 'close', pool: 'pixiu' });
      await load.request({ op: 'close', pool: 'bare' });
    }

    if (cases.has('b')) {
      // Every backlog is posted first (batches of 500, four in flight), so that no
      // catch-up shares the server with the writes of the next; a catch-up of 1,000
      // warms the path first and is not counted.
      const producer = new PixiuClient(pixiu.url, API_TOKEN);
      const backlogs = [{ user: 'backlog-warm', count: 1000 }, ...Array.from({ length: CATCHUP_RUNS }, (_, i) => ({ user: `backlog-${i}`, count: BACKLOG }))];
      const postStart = performance.now();
      for (const { user, count } of backlogs) {
        for (let sent = 0; sent < count;) {
          const batches = [];
          for (let k = 0; k < 4 && sent < count; k++, sent += 500) {
            const first = sent;
            const messages = Array.from({ length: Math.min(500, count - first) }, (_, i) => ({ to: user, type: 'chat.text', data: { k: first + i, text: MESSAGE_TEXT } }));
            batches.push(producer.post('/v1/messages/batch', { messages }));
          }
          for (const answer of await Promise.all(batches)) {
            if (answer.status !== 200) throw new Error(`backlog batch answered ${answer.status}: ${answer.text.slice(0, 200)}`);
          }
        }
      }
      console.log(`[b] ${backlogs.length} backlogs posted in ${fmt(performance.now() - postStart, 0)} ms`);
      const times: number[] = [];
      for (const { user, count } of backlogs) {
        const fetchesBefore = gauge(await pixiuMetrics(pixiu.url), 'pixiu_delivery_fetches_total');
        const c = await load.request({ op: 'catchup', url: pixiu.url, user, expect: count, jwtSecret: JWT_SECRET, timeoutMs: 60_000 });
        const fetches = gauge(await pixiuMetrics(pixiu.url), 'pixiu_delivery_fetches_total') - fetchesBefore;
        if (count === BACKLOG) times.push(c.ms);
        console.log(`[b] ${user}: caught up on ${count} in ${fmt(c.ms, 0)} ms (welcome ${fmt(c.welcomeMs, 1)} ms, `
          + `${c.msgs} msgs, ${c.gaps} gaps, ${c.redelivered} redelivered, ${c.outOfOrder} out of order; ${fetches} inbox reads)`);
      }
      const sorted = [...times].sort((x, y) => x - y);
      figures.push({
        case: `(b) catch-up of ${fmt(BACKLOG, 0)}, median of ${CATCHUP_RUNS} (target <= 0.5 s)`, value: (sorted[Math.floor(sorted.length / 2)] ?? 0) / 1000, unit: 's',
        note: `range ${fmt((sorted[0] ?? 0) / 1000, 3)} - ${fmt((sorted[sorted.length - 1] ?? 0) / 1000, 3)} s; connect call to the last msg, acking every msg`,
      });
    }

    await load.stop();
    await bare.term();
    const exit = await pixiu.term();
    if (cpuProfDir) console.log(`server profile in ${cpuProfDir} (pixiu exit ${exit.code ?? exit.signal ?? ''})`);
    if (allocProfFile) console.log(`server allocation profile in ${allocProfFile} (pixiu exit ${exit.code ?? exit.signal ?? ''})`);
    console.log(`load average at end: ${loadavg()} · run took ${fmt((performance.now() - began) / 1000, 0)} s`);
    const latency = await raw.call('LATENCY', 'LATEST') as [string, number, number, number][];
    console.log(`redis events over 20 ms (LATENCY LATEST: event, latest ms, max ms): ${latency.length === 0 ? 'none' : latency.map(([event, , last, max]) => `${event} ${last}/${max}`).join(', ')}`);
    printTable(figures);
    if (headline) printHeadline('e2e live delivery', headline.value, 'msg/s', headline.limit);
  } finally {
    await files.run();
  }
}

await main();
