/**
 * A broadcast fan-out does not stall live delivery (DESIGN.md §8): one `pixiu serve`
 * child process with 5,000 connections (in a swarm child process) and one more user
 * who receives a steady stream of inbox messages (100/s, from this process). Her p99
 * delivery latency — from this process starting the POST to her socket receiving the
 * `msg` — while broadcasts go to the 5,000 stays within 3× its value before.
 *
 * Measurement: seven rounds, each a quiet second and then six broadcasts, each to all
 * 5,000 and at least 200 ms apart; every message sent inside a window counts for it.
 * Both p99s over all rounds are reported; the bound is checked on the median of the
 * rounds' p99s, and is 3 × the quiet one but never below it + 50 ms. A measurement
 * over the bound is made once more, and the second one decides (both are reported).
 *
 * Why not a plain 3×: this 2-core machine is shared with other test files (two run at
 * once) and other people's runs. A young-generation GC that takes 2–10 ms alone took
 * 50–200 ms with the cores oversubscribed (load 7), and a broadcast to 5,000 needs the
 * server and the clients busy at once, so any contention lands harder on the busy
 * windows: measured (in a first version: five rounds of ten) with this file alone,
 * median p99 17–31 ms before and 34–91 ms during; beside the 1,000-connection test
 * at load ~6, 28–39 ms and 106–129 ms; this version at load 7–8, 63 and 119 ms. The
 * median of rounds keeps one stretched pause from deciding, the floor keeps a quiet
 * p99 of a few ms from making the bound smaller than one such pause, and the second
 * measurement rides out a burst of load from elsewhere. What the test is
 * for still fails by far: a fan-out that does not yield (no chunks) measured a median
 * p99 of 220 ms during against 20 ms before at load ~4, and failed both measurements
 * at load ~9 (378 and 212 ms during against 40 and 24 ms before). The swarm receives
 * at nice 10 so that the clients' receiving, which is not what is measured, gives way
 * to the server (it connects at the default niceness, then is reniced). Not 19: each
 * broadcast waits until all 5,000 got it (some 2 s of the swarm's CPU per measurement),
 * and at nice 19 (a CFS weight of 15 against 1,024 for each of ~8 busy tasks) a clean-
 * clone CI run's file did not finish in its 300 s (27 s alone); nice 10 is a weight of
 * 110. The store runs `relaxed` (no fsync): this is about delivery, not the disk.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { cleanupList, type PixiuClient, type ServeProcess } from '../harness/pixiu-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { WsSwarm } from '../harness/ws-swarm.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';
import { API_TOKEN, expectFrame, serveBroadcastsAlone } from './broadcast-fixture.js';

const CONNECTIONS = 5000;
/** Broadcasts per round, one after another (each to all, then the next)… */
const BROADCASTS = 6;
/** …starting at least this many ms apart. */
const SPACING_MS = 200;
const ROUNDS = 7;
const QUIET_MS = 1000;
/** One message every this many ms. */
const EVERY_MS = 10;
const FLOOR_MS = 50;

const cleanup = cleanupList();
let serve: ServeProcess;
let api: PixiuClient;
let swarm: WsSwarm;

before(async () => {
  ({ serve, api } = await serveBroadcastsAlone(cleanup));
  // Niced (10) only once connected: opening 5,000 connections (a token minted and a
  // handshake each) is not what is measured, and at nice 19 on 2 cores at load 7–9 the
  // swarm got so little of the CPU that it had not connected them all in 120 s (27 s
  // with the file alone).
  swarm = WsSwarm.start(cleanup);
  await swarm.connect(serve.url, Array.from({ length: CONNECTIONS }, (_, i) => ({ user: `crowd-${i}` })), { jwtSecret: JWT_SECRET, concurrency: 100, timeoutMs: 120_000 });
  swarm.renice(10);
});

after(() => cleanup.run());

/** The median of `xs`. */
function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/** The p-th percentile (0–100) of `xs`, nearest rank. */
function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/** What one measurement found. */
interface Measured {
  readonly p99Before: number;
  readonly p99During: number;
  readonly bound: number;
  /** For t.diagnostic. */
  readonly report: string[];
}

/** The listener's connection, and the latency of each message `k` once it arrived. */
interface Listener {
  readonly sentAt: Map<number, number>;
  readonly latency: Map<number, number>;
  /** Resolves once `sent` messages have arrived; rejects after 20 s. */
  allIn(sent: number): Promise<void>;
}

async function listen(): Promise<Listener> {
  const client = await TestClient.connect(serve.url, { token: await testToken(JWT_KEY, 'listener') });
  cleanup.after(() => client.close());
  await expectFrame(client, 'welcome');
  const sentAt = new Map<number, number>();
  const latency = new Map<number, number>();
  let waiting: { sent: number; resolve: () => void } | undefined;
  client.ws.on('message', (raw) => {
    const f = JSON.parse(raw.toString()) as { t: string; seq?: number; data?: { k?: number } };
    if (f.t !== 'msg' || typeof f.data?.k !== 'number') return;
    latency.set(f.data.k, performance.now() - (sentAt.get(f.data.k) as number));
    client.ack(f.seq as number);
    if (waiting !== undefined && latency.size === waiting.sent) waiting.resolve();
  });
  return {
    sentAt,
    latency,
    allIn: (sent) => new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${latency.size} of ${sent} messages arrived`)), 20_000);
      waiting = { sent, resolve: () => { clearTimeout(timer); resolve(); } };
      if (latency.size === sent) waiting.resolve();
    }),
  };
}

/** One measurement: ROUNDS rounds of a quiet window and then BROADCASTS broadcasts. */
async function measure(listener: Listener, attempt: number): Promise<Measured> {
  const { sentAt, latency } = listener;
  // The steady stream: one POST every EVERY_MS, whatever is still in flight.
  let k = sentAt.size;
  const failures: string[] = [];
  const producer = setInterval(() => {
    const n = k++;
    sentAt.set(n, performance.now());
    api.post('/v1/messages', { to: 'listener', type: 'test.tick', data: { k: n } })
      .then((a) => { if (a.status !== 201) failures.push(a.text); }, (err: unknown) => failures.push(String(err)));
  }, EVERY_MS);
  const quiet: number[][] = [];
  const busy: number[][] = [];
  const perBroadcastMs: number[] = [];
  try {
    // Warm-up, then each round: a quiet window, then the broadcasts.
    await new Promise((r) => setTimeout(r, QUIET_MS));
    for (let round = 0; round < ROUNDS; round++) {
      let from = k;
      await new Promise((r) => setTimeout(r, QUIET_MS));
      quiet.push([from, k]);
      from = k;
      for (let i = 0; i < BROADCASTS; i++) {
        const started = performance.now();
        const result = await swarm.expect(1, {
          kind: 'post', url: new URL('/v1/broadcast', serve.url).href, token: API_TOKEN, bodies: [{ type: 'test.news', data: { attempt, round, i } }],
        });
        perBroadcastMs.push(result.ms);
        const rest = SPACING_MS - (performance.now() - started);
        if (rest > 0) await new Promise((r) => setTimeout(r, rest));
      }
      busy.push([from, k]);
    }
  } finally {
    clearInterval(producer);
  }
  await listener.allIn(k);
  assert.deepEqual(failures, []);
  const samples = ([a, b]: number[]): number[] => Array.from({ length: (b as number) - (a as number) }, (_, i) => latency.get((a as number) + i) as number);
  // A window whose timer was starved (this process too shares the cores) still has a
  // few dozen messages; fewer would make its p99 meaningless.
  assert.ok([...quiet, ...busy].every((w) => samples(w).length >= 20), 'too few messages in a window to measure');
  const p99Before = median(quiet.map((w) => percentile(samples(w), 99)));
  const p99During = median(busy.map((w) => percentile(samples(w), 99)));
  const bound = Math.max(3 * p99Before, p99Before + FLOOR_MS);
  const summary = (xs: number[]): string => `p99 ${percentile(xs, 99).toFixed(1)} ms, p90 ${percentile(xs, 90).toFixed(1)} ms, p50 ${percentile(xs, 50).toFixed(1)} ms over ${xs.length} messages`;
  const rounds = (windows: number[][]): string => windows.map((w) => percentile(samples(w), 99).toFixed(1)).join(', ');
  return {
    p99Before, p99During, bound,
    report: [
      `attempt ${attempt}: before: ${summary(quiet.flatMap(samples))}; the rounds' p99s ${rounds(quiet)} ms`,
      `attempt ${attempt}: during: ${summary(busy.flatMap(samples))}; the rounds' p99s ${rounds(busy)} ms`,
      `attempt ${attempt}: median of the rounds' p99s: ${p99Before.toFixed(1)} ms before, ${p99During.toFixed(1)} ms during; bound ${bound.toFixed(1)} ms`,
      `attempt ${attempt}: POST to the last of ${CONNECTIONS} connections, per broadcast: p50 ${percentile(perBroadcastMs, 50).toFixed(0)} ms, max ${Math.max(...perBroadcastMs).toFixed(0)} ms; load average (1 min) ${os.loadavg()[0]?.toFixed(1)} on ${os.cpus().length} cores`,
    ],
  };
}

// 300 s: alone the test takes ~25 s; in the suite, beside five other files with the
// cores oversubscribed, its rounds stretched past the former 150 s (a clean-clone run of
// 2026-12-06: 238 s). It bounds a ratio of latencies, not a time.
test(`p99 inbox latency during broadcasts to ${CONNECTIONS} connections stays within 3× its value before`, { timeout: 300_000 }, async (t) => {
  const listener = await listen();
  let m = await measure(listener, 1);
  for (const line of m.report) t.diagnostic(line);
  if (m.p99During > m.bound) {
    // Once more: a burst of load from elsewhere on the machine spoils one measurement,
    // a fan-out that stalls delivery spoils both.
    m = await measure(listener, 2);
    for (const line of m.report) t.diagnostic(line);
  }
  assert.ok(m.p99During <= m.bound, `p99 during the broadcasts ${m.p99During.toFixed(1)} ms > ${m.bound.toFixed(1)} ms`);
});
