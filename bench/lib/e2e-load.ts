/**
 * bench:e2e's load process: the WebSocket clients and the HTTP producers, in a child
 * process of their own so that they share no event loop with the server under test.
 * Driven by bench/e2e.ts over IPC (bench/lib/e2e-protocol.ts), one command at a time.
 *
 * - Clients are lean `ws` sockets (the harness's TestClient keeps every frame, which
 *   at thousands of frames a second is memory the measure does not need). Each `msg`
 *   is acked at once (`{"t":"ack","seq":N}`); a `gap` is acked at its `to`.
 * - Producers are open-loop: a 1 ms timer issues as many POSTs as the rate says are
 *   due, whatever is still in flight, over keep-alive `node:http` connections (at most
 *   {@link PRODUCER_SOCKETS}; more requests wait in the agent, and that wait counts in
 *   the latency). Each body carries its send time (`performance.now()` of this process,
 *   taken just before the request is built) and its step number in `data`, so the
 *   client that receives it computes the latency on the same clock. A step that ends
 *   overloaded drops the POSTs still queued in the agent ({@link SHED_BACKLOG_S}).
 */
import http from 'node:http';
import { MESSAGE_TEXT } from './message-text.js';
import WebSocket, { type RawData } from 'ws';
import { testToken } from '../../test/harness/ws-client.js';
import type {
  CatchupResult, ConnectResult, LatencySummary, LoadCommand, LoadReply, LoadRequest, LoadResults, StepResult, TargetKind,
} from './e2e-protocol.js';

/** Keep-alive connections of the producers, per server (as bench:ingest's 64). */
const PRODUCER_SOCKETS = 64;
/** A handshake that has not reached `welcome` by then fails. */
const CONNECT_TIMEOUT_MS = 30_000;
/** After the grace period, a step keeps waiting for stragglers until none came for this long. */
const STALL_MS = 3000;
/** And never longer than this after its window. */
const DRAIN_MAX_MS = 20_000;
/**
 * A step that ends with more than this many seconds' worth of POSTs unanswered is
 * overloaded whatever comes next: the POSTs still waiting in the agent for a socket
 * are dropped (shed) rather than sent, so that the backlog drains before the next step.
 */
const SHED_BACKLOG_S = 0.5;

/** A server frame, as far as the load reads it. */
interface InFrame {
  t: string;
  seq?: number;
  to?: number;
  redelivered?: boolean;
  data?: { t0?: number; s?: number };
}

type FrameHandler = (client: BenchClient, frame: InFrame, receivedAt: number) => void;

/** One WebSocket client. */
class BenchClient {
  readonly ws: WebSocket;
  /** Resolves on the `welcome` frame; rejects when the socket fails or closes first. */
  readonly welcomed: Promise<void>;
  /** Resolves once the socket has closed. */
  readonly closed: Promise<void>;

  constructor(url: string, headers: Record<string, string>, onFrame: FrameHandler) {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    this.ws = ws;
    this.closed = new Promise((resolve) => ws.once('close', () => resolve()));
    this.welcomed = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`no welcome within ${CONNECT_TIMEOUT_MS} ms`));
        ws.terminate();
      }, CONNECT_TIMEOUT_MS);
      let welcomed = false;
      ws.on('message', (data: RawData) => {
        const receivedAt = performance.now();
        const frame = JSON.parse(data.toString()) as InFrame;
        if (frame.t === 'welcome' && !welcomed) {
          welcomed = true;
          clearTimeout(timer);
          resolve();
          return;
        }
        onFrame(this, frame, receivedAt);
      });
      ws.once('unexpected-response', (_req, res) => {
        clearTimeout(timer);
        reject(new Error(`HTTP ${res.statusCode ?? 0} on the upgrade`));
        res.resume();
      });
      ws.once('close', (code) => {
        clearTimeout(timer);
        if (!welcomed) reject(new Error(`closed ${code} before welcome`));
      });
    });
    ws.on('error', () => undefined);
  }

  ack(seq: number): void {
    this.ws.send(`{"t":"ack","seq":${seq}}`);
  }
}

/** Opens one client of `kind` for `user` and waits for its `welcome`. */
async function openClient(kind: TargetKind, baseUrl: string, user: string, jwtSecret: string, onFrame: FrameHandler): Promise<BenchClient> {
  const wsBase = baseUrl.replace(/^http/, 'ws');
  let client: BenchClient;
  if (kind === 'pixiu') {
    const token = await testToken({ kind: 'secret', secret: jwtSecret }, user, { ttlSec: 3 * 3600 });
    client = new BenchClient(`${wsBase}/v1/connect?device=d1`, { authorization: `Bearer ${token}` }, onFrame);
  } else {
    client = new BenchClient(`${wsBase}/v1/connect?user=${encodeURIComponent(user)}`, {}, onFrame);
  }
  await client.welcomed;
  return client;
}

/** What one step records as its frames arrive. */
class StepRecorder {
  readonly step: number;
  windowEnd = Number.POSITIVE_INFINITY;
  graceEnd = Number.POSITIVE_INFINITY;
  readonly latencies: number[] = [];
  /** With BENCH_E2E_TRACE_MS: [send time (epoch ms), latency ms] of each slower message. */
  readonly slow: [number, number][] = [];
  /** When the step began (`performance.now()`). */
  startedAt = 0;
  inWindow = 0;
  inGrace = 0;
  total = 0;
  redelivered = 0;
  gaps = 0;
  lastProgressAt = performance.now();

  constructor(step: number) {
    this.step = step;
  }
}

/** BENCH_E2E_TRACE_MS=N: each step prints, on stderr, the spells of messages slower than N ms. */
const TRACE_MS = Number(process.env.BENCH_E2E_TRACE_MS ?? 0);

/** Prints the spells of slow messages of `rec`: runs of them sent no more than 50 ms apart. */
function printSlowSpells(rec: StepRecorder): void {
  const slow = rec.slow.sort((a, b) => a[0] - b[0]);
  let i = 0;
  while (i < slow.length) {
    let j = i;
    let max = 0;
    while (j < slow.length && (j === i || (slow[j]?.[0] ?? 0) - (slow[j - 1]?.[0] ?? 0) <= 50)) {
      max = Math.max(max, slow[j]?.[1] ?? 0);
      j += 1;
    }
    const from = slow[i]?.[0] ?? 0;
    const to = slow[j - 1]?.[0] ?? 0;
    const at = from - performance.timeOrigin - rec.startedAt;
    process.stderr.write(`[trace] step ${rec.step}: ${j - i} messages over ${TRACE_MS} ms, sent ${from.toFixed(0)}..${to.toFixed(0)} (${at.toFixed(0)} ms into the step, for ${(to - from).toFixed(0)} ms), max ${max.toFixed(1)} ms\n`);
    i = j;
  }
}

/** The step being measured; frames of other steps are acked and not counted. */
let current: StepRecorder | undefined;

/** The live clients' handler: ack, then record. */
const onLiveFrame: FrameHandler = (client, frame, receivedAt) => {
  if (frame.t === 'msg' && frame.seq !== undefined) {
    client.ack(frame.seq);
    const rec = current;
    if (rec === undefined || frame.data?.s !== rec.step) return;
    if (frame.redelivered) {
      rec.redelivered += 1;
      return;
    }
    rec.total += 1;
    rec.lastProgressAt = receivedAt;
    if (receivedAt <= rec.windowEnd) rec.inWindow += 1;
    else if (receivedAt <= rec.graceEnd) rec.inGrace += 1;
    const latency = receivedAt - (frame.data.t0 ?? receivedAt);
    rec.latencies.push(latency);
    if (TRACE_MS > 0 && latency > TRACE_MS) rec.slow.push([performance.timeOrigin + (frame.data.t0 ?? receivedAt), latency]);
  } else if (frame.t === 'gap' && frame.to !== undefined) {
    client.ack(frame.to);
    if (current) current.gaps += 1;
  }
};

/** Open pools: their users, in order, and clients. */
const pools = new Map<string, { users: string[]; clients: BenchClient[] }>();

async function connect(cmd: Extract<LoadCommand, { op: 'connect' }>): Promise<ConnectResult> {
  const start = performance.now();
  const pool = pools.get(cmd.pool) ?? { users: [], clients: [] };
  pools.set(cmd.pool, pool);
  let next = 0;
  let failed = 0;
  let firstError: string | undefined;
  const worker = async (): Promise<void> => {
    while (next < cmd.count) {
      const user = `${cmd.prefix}${next++}`;
      try {
        pool.clients.push(await openClient(cmd.kind, cmd.url, user, cmd.jwtSecret, onLiveFrame));
        pool.users.push(user);
      } catch (err) {
        failed += 1;
        firstError ??= (err as Error).message;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, cmd.concurrency) }, worker));
  const result: ConnectResult = { opened: cmd.count - failed, failed, ms: performance.now() - start };
  return firstError === undefined ? result : { ...result, firstError };
}

async function close(cmd: Extract<LoadCommand, { op: 'close' }>): Promise<{ closed: number }> {
  const pool = pools.get(cmd.pool);
  pools.delete(cmd.pool);
  if (!pool) return { closed: 0 };
  for (const c of pool.clients) c.ws.close(1000);
  const deadline = setTimeout(() => { for (const c of pool.clients) c.ws.terminate(); }, 10_000);
  await Promise.all(pool.clients.map((c) => c.closed));
  clearTimeout(deadline);
  return { closed: pool.clients.length };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: PRODUCER_SOCKETS });

/** The error a POST is destroyed with when its step sheds load. */
const SHED = 'shed: the step was overloaded';

/** One POST in flight. */
interface Post {
  readonly req: http.ClientRequest;
  /** True once the agent gave it a socket (it is on the wire, or about to be). */
  sent: boolean;
  /** The status (0: a network error or shed, with its message). */
  readonly done: Promise<{ status: number; error?: string }>;
}

/** POSTs a JSON body. */
function post(target: URL, token: string, body: string): Post {
  let settle: (r: { status: number; error?: string }) => void = () => undefined;
  const done = new Promise<{ status: number; error?: string }>((resolve) => {
    let settled = false;
    settle = (r) => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
  });
  const req = http.request({
    agent, host: target.hostname, port: target.port, path: target.pathname, method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${token}` },
  }, (res) => {
    res.resume();
    res.on('end', () => settle({ status: res.statusCode ?? 0 }));
  });
  const p: Post = { req, sent: false, done };
  req.once('socket', () => { p.sent = true; });
  req.on('error', (err) => settle({ status: 0, error: err.message }));
  req.on('close', () => settle({ status: 0, error: 'closed without an answer' }));
  req.end(body);
  return p;
}

/** p50/p99/p999/max of a sample, ms. */
function summarize(values: number[]): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  const at = (q: number): number => sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { count: sorted.length, p50: at(0.5), p99: at(0.99), p999: at(0.999), max: sorted.length === 0 ? 0 : sorted[sorted.length - 1] ?? 0 };
}

/** Resolves when `done()` holds, checking every 10 ms. */
function until(done: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (done()) resolve();
      else setTimeout(check, 10);
    };
    check();
  });
}

let steps = 0;
let messages = 0;

async function step(cmd: Extract<LoadCommand, { op: 'step' }>): Promise<StepResult> {
  const pool = pools.get(cmd.pool);
  if (!pool || pool.users.length === 0) throw new Error(`no connected pool ${cmd.pool}`);
  const users = pool.users;
  const target = new URL(cmd.postUrl);
  const rec = new StepRecorder(++steps);
  const total = Math.round(cmd.rate * cmd.seconds);
  const postLatencies: number[] = [];
  let issued = 0;
  let answered = 0;
  let postOk = 0;
  let postFailed = 0;
  let shed = 0;
  let firstPostError: string | undefined;
  let lastIssueAt = 0;
  const waiting = new Set<Post>();

  const issue = (): void => {
    const user = users[Math.floor(Math.random() * users.length)] as string;
    const t0 = performance.now();
    const body = JSON.stringify({ to: user, type: 'chat.text', data: { t0, s: rec.step, k: ++messages, text: MESSAGE_TEXT } });
    issued += 1;
    lastIssueAt = t0;
    const p = post(target, cmd.apiToken, body);
    waiting.add(p);
    void p.done.then(({ status, error }) => {
      waiting.delete(p);
      answered += 1;
      if (error === SHED) {
        shed += 1;
        return;
      }
      postLatencies.push(performance.now() - t0);
      if (status >= 200 && status < 300) postOk += 1;
      else {
        postFailed += 1;
        firstPostError ??= error ?? `HTTP ${status}`;
      }
    });
  };

  const start = performance.now();
  rec.startedAt = start;
  rec.windowEnd = start + cmd.seconds * 1000;
  rec.graceEnd = rec.windowEnd + cmd.graceMs;
  current = rec;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * cmd.rate) / 1000));
      while (issued < due) issue();
      if (issued >= total) {
        clearInterval(timer);
        resolve();
      }
    };
    const timer = setInterval(tick, 1);
  });
  if (issued - answered > cmd.rate * SHED_BACKLOG_S) {
    for (const p of waiting) if (!p.sent) p.req.destroy(new Error(SHED));
  }
  // Every POST answered and every accepted message received; or, past the grace
  // period, nothing new for STALL_MS; or DRAIN_MAX_MS after the window at most.
  await until(() => {
    const now = performance.now();
    if (answered === issued && rec.total >= postOk) return true;
    if (now > rec.windowEnd + DRAIN_MAX_MS) return true;
    return now > rec.graceEnd && answered === issued && now - rec.lastProgressAt > STALL_MS;
  });
  const wallMs = performance.now() - start;
  current = undefined;
  if (TRACE_MS > 0) printSlowSpells(rec);
  const result: StepResult = {
    rate: cmd.rate, seconds: cmd.seconds, issued, postOk, postFailed, shed, issueSpanMs: lastIssueAt - start,
    deliveredInWindow: rec.inWindow, deliveredInGrace: rec.inGrace, deliveredTotal: rec.total,
    redelivered: rec.redelivered, gaps: rec.gaps,
    latency: summarize(rec.latencies), postLatency: summarize(postLatencies),
    wallMs,
  };
  return firstPostError === undefined ? result : { ...result, firstPostError };
}

async function catchup(cmd: Extract<LoadCommand, { op: 'catchup' }>): Promise<CatchupResult> {
  let msgs = 0;
  let gaps = 0;
  let redelivered = 0;
  let outOfOrder = 0;
  let last = 0;
  let doneAt = 0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => { finish = resolve; });
  const onFrame: FrameHandler = (client, frame, receivedAt) => {
    if (frame.t === 'msg' && frame.seq !== undefined) {
      client.ack(frame.seq);
      if (frame.redelivered) redelivered += 1;
      else msgs += 1;
      if (frame.seq !== last + 1) outOfOrder += 1;
      last = Math.max(last, frame.seq);
    } else if (frame.t === 'gap' && frame.to !== undefined) {
      client.ack(frame.to);
      gaps += 1;
      last = Math.max(last, frame.to);
    }
    if (last >= cmd.expect && doneAt === 0) {
      doneAt = receivedAt;
      finish();
    }
  };
  const start = performance.now();
  const client = await openClient('pixiu', cmd.url, cmd.user, cmd.jwtSecret, onFrame);
  const welcomeMs = performance.now() - start;
  const timer = setTimeout(finish, cmd.timeoutMs);
  await finished;
  clearTimeout(timer);
  client.ws.close(1000);
  await client.closed;
  if (doneAt === 0) throw new Error(`catch-up of ${cmd.user} reached seq ${last} of ${cmd.expect} in ${cmd.timeoutMs} ms`);
  return { ms: doneAt - start, welcomeMs, msgs, gaps, redelivered, outOfOrder };
}

async function handle(cmd: LoadCommand): Promise<LoadResults[LoadCommand['op']]> {
  switch (cmd.op) {
    case 'connect': return connect(cmd);
    case 'close': return close(cmd);
    case 'step': return step(cmd);
    case 'catchup': return catchup(cmd);
  }
}

process.on('message', (req: LoadRequest) => {
  const reply = (r: LoadReply): void => {
    process.send?.(r);
  };
  handle(req).then(
    (result) => reply({ id: req.id, ok: true, result }),
    (err: unknown) => reply({ id: req.id, ok: false, error: err instanceof Error ? err.stack ?? err.message : String(err) }),
  );
});
// The coordinator went away: nothing left to do.
process.on('disconnect', () => process.exit(0));
