/**
 * Broadcast fan-out (DESIGN.md §8): one `pixiu serve` child process with 5,000
 * WebSocket connections, against the ceiling measured in the same run — a bare `ws`
 * server (bench/lib/bare-ws-broadcast.ts, a child process too) sending the same frame
 * to 5,000 connections of its own, two ways: each frame written on its own (a plain
 * loop of `ws.send`), and each socket's frames of a burst corked into one write, as
 * Pixiu writes a burst. The headline's limit is the higher of the two.
 *
 * - single: the time from the POST until the last of the 5,000 connections has the
 *   broadcast (for the bare server: from its `GET /go` until the last has the frame);
 * - burst: 20 broadcasts POSTed at once, back to back; frames delivered per second
 *   (20 × 5,000 over the time from the first POST until the last connection has all 20).
 * - live delivery during broadcasts: one more user's inbox latency (100 messages/s)
 *   before and while broadcasts go to the 5,000 (bench/lib/live-latency.ts), Pixiu only.
 *
 * The clients live in two swarm processes (test/harness/ws-swarm.ts), one per server,
 * which also start the triggers and time them on their own clock; so neither server
 * shares an event loop with its clients. Cases alternate (Pixiu, bare, Pixiu …) over
 * several rounds so that load from other processes falls on both alike; each figure is
 * the median over the rounds, with the range.
 *
 * PIXIU_BROADCAST_RATE is set to 10,000,000 frames/s, far above what one node can send,
 * so the per-node rate limit is not what is measured (the limiter still runs, and its
 * cost is part of the figure). Run: npm run bench:broadcast
 *
 * `BENCH_CPU_PROF=<dir>` runs the Pixiu server with `--cpu-prof` and writes its profile
 * there when the bench ends (for finding where the fan-out's time goes).
 */
import os from 'node:os';
import { RedisServer } from '../test/harness/redis-server.js';
import { cleanupList, PixiuClient, spawnListening, tempDataDir } from '../test/harness/pixiu-server.js';
import { buildServe, SERVE_DESCRIPTION, spawnCompiledServe } from './lib/serve-flags.js';
import { WsSwarm, type SwarmConn } from '../test/harness/ws-swarm.js';
import { printConditions, printHeadline, printTable, type Figure } from './lib/report.js';
import { BROADCASTS, EVERY_MS, measureLiveLatency, percentile, SPACING_MS } from './lib/live-latency.js';

const CONNECTIONS = 5000;
const BURST = 20;
const ROUNDS = 7;
const API_TOKEN = 'bench-broadcast-api-token-0123456789';
const JWT_SECRET = 'bench-broadcast-hs256-secret-of-32-chars-or-more';
const RATE = 10_000_000;
/** ~160 characters of text, as the other benches' messages carry. */
const DATA = { text: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(3).slice(0, 160), n: 1 };
const TYPE = 'bench.news';

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] as number : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

function range(xs: readonly number[], digits = 0): string {
  const f = (n: number): string => n.toLocaleString('en-US', { maximumFractionDigits: digits });
  return `${f(Math.min(...xs))} – ${f(Math.max(...xs))}`;
}

/** The process CPU time of a Pixiu server so far, µs (from its Prometheus metrics). */
async function pixiuCpuMicros(url: string): Promise<number> {
  const text = await (await fetch(new URL('/metrics', url))).text();
  const m = /^pixiu_process_cpu_seconds_total (\S+)$/m.exec(text);
  return m ? Number(m[1]) * 1e6 : NaN;
}

/** The bare server's CPU time so far, µs. */
async function bareCpuMicros(url: string): Promise<number> {
  const cpu = (await (await fetch(new URL('/cpu', url))).json()) as { userMicros: number; systemMicros: number };
  return cpu.userMicros + cpu.systemMicros;
}

const profileDir = process.env.BENCH_CPU_PROF;
const cleanup = cleanupList();
try {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const dataDir = await tempDataDir(cleanup);
  const env = {
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_BROADCAST_RATE: String(RATE), PIXIU_LOG_LEVEL: 'info',
  };
  // `pixiu serve` built and run as npm start does, and the profiler's flags when asked for.
  buildServe();
  const profArgs = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
  const pixiu = await spawnCompiledServe(profArgs, env, cleanup);
  // A profile is written when the process exits by itself: SIGTERM before the clean-up's SIGKILL.
  if (profileDir !== undefined) cleanup.after(() => pixiu.term());
  const api = new PixiuClient(pixiu.url, API_TOKEN);

  // The bare server sends exactly the frame Pixiu sends: take one from a broadcast.
  const probe = await api.post('/v1/broadcast', { type: TYPE, data: DATA });
  if (probe.status !== 201) throw new Error(`probe broadcast: ${probe.text}`);
  const { id, bseq } = probe.body as { id: string; bseq: string };
  const frame = `{"t":"bcast","bseq":${JSON.stringify(bseq)},"id":${JSON.stringify(id)},"type":${JSON.stringify(TYPE)},"ts":${Date.now()},"data":${JSON.stringify(DATA)}}`;
  const bare = await spawnListening(['bench/lib/bare-ws-broadcast.ts'], { BARE_WS_FRAME: frame }, cleanup, 'bare ws listening');

  const conns: SwarmConn[] = Array.from({ length: CONNECTIONS }, (_, i) => ({ user: `user-${i}` }));
  const pixiuClients = WsSwarm.start(cleanup);
  const bareClients = WsSwarm.start(cleanup);
  const connectPixiuMs = await pixiuClients.connect(pixiu.url, conns, { jwtSecret: JWT_SECRET, concurrency: 100, timeoutMs: 120_000 });
  await bareClients.connect(bare.url, conns, { welcome: false, concurrency: 100 });

  const body = { type: TYPE, data: DATA };
  const post = (n: number) => ({ kind: 'post', url: new URL('/v1/broadcast', pixiu.url).href, token: API_TOKEN, bodies: Array.from({ length: n }, () => body) }) as const;
  const go = (n: number, cork = false) => ({ kind: 'get', url: new URL(`/go?n=${n}${cork ? '&cork=1' : ''}`, bare.url).href }) as const;

  // Warm-up: JIT, socket buffers, the store's first batches.
  await pixiuClients.expect(BURST, post(BURST));
  await bareClients.expect(BURST, go(BURST));
  await bareClients.expect(BURST, go(BURST, true));

  const loads: number[] = [];
  const pSingle: number[] = [];
  const bSingle: number[] = [];
  const pBurst: number[] = [];
  const bBurst: number[] = [];
  const cBurst: number[] = [];
  const pCpu: number[] = [];
  const bCpu: number[] = [];
  const cCpu: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    loads.push(os.loadavg()[0] ?? 0);
    pSingle.push((await pixiuClients.expect(1, post(1))).ms);
    bSingle.push((await bareClients.expect(1, go(1))).ms);
    let cpu = await pixiuCpuMicros(pixiu.url);
    pBurst.push((BURST * CONNECTIONS * 1000) / (await pixiuClients.expect(BURST, post(BURST))).ms);
    pCpu.push((await pixiuCpuMicros(pixiu.url) - cpu) / (BURST * CONNECTIONS));
    cpu = await bareCpuMicros(bare.url);
    bBurst.push((BURST * CONNECTIONS * 1000) / (await bareClients.expect(BURST, go(BURST))).ms);
    bCpu.push((await bareCpuMicros(bare.url) - cpu) / (BURST * CONNECTIONS));
    cpu = await bareCpuMicros(bare.url);
    cBurst.push((BURST * CONNECTIONS * 1000) / (await bareClients.expect(BURST, go(BURST, true))).ms);
    cCpu.push((await bareCpuMicros(bare.url) - cpu) / (BURST * CONNECTIONS));
  }
  // Last, as the test it replaced measured it: the swarm's receiving, which is not what
  // is measured, niced (10) so that it gives way to the server.
  pixiuClients.renice(10);
  const live = await measureLiveLatency({ url: pixiu.url, api, swarm: pixiuClients, jwtSecret: JWT_SECRET, rounds: ROUNDS });

  printConditions({
    pixiu: `pixiu serve child process, ${SERVE_DESCRIPTION}`,
    connections: CONNECTIONS, burst: BURST, rounds: ROUNDS, 'PIXIU_BROADCAST_RATE': RATE,
    'frame bytes': Buffer.byteLength(frame), 'load avg (1 min) during rounds': range(loads, 2),
  });
  const figures: Figure[] = [
    { case: `Pixiu: POST → last of ${CONNECTIONS} has it (median)`, value: median(pSingle), unit: 'ms', note: range(pSingle, 1) },
    { case: 'bare ws: GET /go → last has it (median)', value: median(bSingle), unit: 'ms', note: range(bSingle, 1) },
    { case: `Pixiu: burst of ${BURST} (median)`, value: median(pBurst), unit: 'frames/s', note: range(pBurst) },
    { case: `bare ws: burst of ${BURST}, each frame written alone (median)`, value: median(bBurst), unit: 'frames/s', note: range(bBurst) },
    { case: `bare ws: burst of ${BURST}, each socket's frames corked (median)`, value: median(cBurst), unit: 'frames/s', note: range(cBurst) },
    { case: 'Pixiu server CPU per frame (burst)', value: median(pCpu), unit: 'µs', note: range(pCpu, 2) },
    { case: 'bare ws server CPU per frame, frames alone', value: median(bCpu), unit: 'µs', note: range(bCpu, 2) },
    { case: 'bare ws server CPU per frame, corked', value: median(cCpu), unit: 'µs', note: range(cCpu, 2) },
    { case: `connecting ${CONNECTIONS} clients to Pixiu`, value: connectPixiuMs, unit: 'ms' },
  ];
  printTable(figures);
  const liveNote = (rounds: readonly number[], all: readonly number[]): string =>
    `rounds' p99s ${range(rounds, 1)} ms; all ${all.length} messages: p50 ${percentile(all, 50).toFixed(1)}, p99 ${percentile(all, 99).toFixed(1)} ms`;
  const before = median(live.roundsBefore);
  const during = median(live.roundsDuring);
  printTable([
    { case: `inbox p99 before broadcasts (median of ${ROUNDS} rounds)`, value: before, unit: 'ms', note: `${1000 / EVERY_MS} msg/s to one more user; ${liveNote(live.roundsBefore, live.before)}` },
    { case: `inbox p99 during broadcasts (median of ${ROUNDS} rounds)`, value: during, unit: 'ms', note: `${BROADCASTS} broadcasts to ${CONNECTIONS} per round, ${SPACING_MS} ms apart; ${liveNote(live.roundsDuring, live.during)}` },
    { case: 'inbox p99 during / before', value: during / before, unit: '', note: `the former test's bound: 3× or +50 ms; POST → last of ${CONNECTIONS}: p50 ${percentile(live.perBroadcastMs, 50).toFixed(0)} ms` },
  ]);
  printTable([
    { case: 'ratio Pixiu / bare, frames alone', value: median(pBurst) / median(bBurst), unit: '' },
    { case: 'ratio Pixiu / bare, corked', value: median(pBurst) / median(cBurst), unit: '' },
  ]);
  printHeadline('broadcast fan-out', median(pBurst), 'frames/s', Math.max(median(bBurst), median(cBurst)));
} finally {
  await cleanup.run();
}
