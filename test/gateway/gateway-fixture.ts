/**
 * What the gateway tests share: an in-process service with a known JWT secret, clients
 * of its users, messages posted to them, and the check of a refusal before the upgrade
 * (an HTTP status with the JSON error body of DESIGN.md §7).
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../src/logger.js';
import type { ConfigOverrides } from '../../src/config/config.js';
import type { JwtKeySource } from '../../src/auth/secrets.js';
import { expectError, metricSample } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { startInProcess, type CleanupContext, type HttpAnswer, type InProcessServer } from '../harness/pixiu-server.js';
import { Refused, TestClient, testToken, type ConnectParams, type Frame } from '../harness/ws-client.js';

/** The HS256 secret every gateway test service verifies client tokens with. */
export const JWT_SECRET = 'gateway-tests-hs256-secret-of-32-chars-or-more';
/** {@link JWT_SECRET} as a key source, to mint tokens. */
export const JWT_KEY: JwtKeySource = { kind: 'secret', secret: JWT_SECRET };

/** How a test client connects. */
export interface ConnectAs {
  device?: string;
  /** Query parameters besides `device`. */
  params?: ConnectParams;
  headers?: Record<string, string>;
  /** A token to use instead of a fresh one for the user. */
  token?: string;
}

/** A running service and helpers bound to it. */
export interface GatewayFixture extends InProcessServer {
  readonly url: string;
  /** Connects as `user` with a one-hour token; resolves once open (the welcome is the first frame). */
  connect(user: string, as?: ConnectAs): Promise<TestClient>;
  /** {@link connect}, then reads the welcome frame. */
  connectWelcomed(user: string, as?: ConnectAs): Promise<{ client: TestClient; welcome: Frame }>;
  /** Posts `count` messages to `user`; resolves with their seqs. */
  post(user: string, count?: number): Promise<number[]>;
}

/**
 * Starts the service in this process with {@link JWT_SECRET} and the given settings
 * (its log to `logger` when one is given, else silent); every client it connects is
 * closed when the test ends.
 */
export async function startGateway(t: CleanupContext, overrides: ConfigOverrides & { redisUrl: string }, logger?: Logger): Promise<GatewayFixture> {
  const server = await startInProcess(t, { jwtSecret: JWT_SECRET, ...overrides }, logger);
  const url = server.service.url;
  const clients: TestClient[] = [];
  t.after(() => Promise.all(clients.map((c) => c.close())));
  const connect = async (user: string, as: ConnectAs = {}): Promise<TestClient> => {
    const token = as.token ?? await testToken(JWT_KEY, user);
    const params: ConnectParams = { ...as.params, ...(as.device !== undefined ? { device: as.device } : {}) };
    const client = await TestClient.connect(url, { token, params, ...(as.headers ? { headers: as.headers } : {}) });
    clients.push(client);
    return client;
  };
  return {
    ...server,
    url,
    connect,
    connectWelcomed: async (user, as) => {
      const client = await connect(user, as);
      const welcome = await client.next();
      assert.equal(welcome.t, 'welcome', JSON.stringify(welcome));
      return { client, welcome };
    },
    post: async (user, count = 1) => {
      const seqs: number[] = [];
      for (let i = 0; i < count; i++) {
        const answer = await server.client.post('/v1/messages', { to: user, type: 'note', data: { i } });
        assert.equal(answer.status, 201, answer.text);
        seqs.push((answer.body as { recipients: Array<{ seq: number }> }).recipients[0]?.seq ?? 0);
      }
      return seqs;
    },
  };
}

/**
 * Asserts that a connection attempt was refused before the upgrade with `status` and
 * the JSON error body `{error: {code, message}}` (no stack trace).
 * @returns the error message
 */
export async function expectRefused(attempt: Promise<TestClient>, status: number, code: string, message?: RegExp): Promise<string> {
  let refusal: Refused;
  try {
    const client = await attempt;
    await client.close();
    return assert.fail(`connected; expected HTTP ${status} ${code}`);
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    refusal = err;
  }
  const answer: HttpAnswer = { status: refusal.status, headers: refusal.headers, text: refusal.text, body: refusal.body, elapsedMs: 0 };
  return expectError(answer, status, code, message);
}

/** Sends a ping and waits for its pong: the connection still answers, and every frame sent before it was handled. */
export async function expectPong(client: TestClient): Promise<void> {
  client.send({ t: 'ping' });
  assert.deepEqual(await client.nextOf('pong'), { t: 'pong' });
}

/**
 * Asserts the connection stays open until `untilMs` (ms since the epoch) and answers a
 * ping then: its close is waited for, up to that time, rather than pinged for in a loop,
 * which would pass the limit on frames other than `ack` (src/gateway/frame-limits.ts).
 */
export async function pongsUntil(client: TestClient, untilMs: number): Promise<void> {
  const left = untilMs - Date.now();
  if (left > 0) {
    const closed = await client.waitClose(left).then((info) => info, () => undefined);
    assert.equal(closed, undefined, `the connection closed before ${new Date(untilMs).toISOString()}: ${JSON.stringify(closed)}`);
  }
  await expectPong(client);
}

/**
 * The server's end of each socket upgraded from now on, by the connecting `device`
 * query parameter: a test pauses one to stop reading on the client's behalf while the
 * server keeps writing (backpressure, a catch-up held back).
 */
export function serverSockets(gw: Pick<InProcessServer, 'service'>): Map<string, Duplex> {
  const sockets = new Map<string, Duplex>();
  gw.service.app.server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    const device = new URL(req.url ?? '/', 'http://localhost').searchParams.get('device');
    if (device !== null) sockets.set(device, socket);
  });
  return sockets;
}

/** A client that has stopped reading (its `ws` paused), and the server's end of its socket. */
export interface StalledClient {
  readonly client: TestClient;
  /** The server's end: its `writableLength` is what the node holds for the client, bytes. */
  readonly sock: Duplex;
}

/**
 * Stops `client` reading (`ws` pause: the server's send buffer fills once the kernel's
 * have) and finds the server's end of its socket among `sockets` ({@link serverSockets})
 * by its `device`.
 * @throws AssertionError when no socket of `device` was upgraded
 */
export function stall(client: TestClient, sockets: ReadonlyMap<string, Duplex>, device: string): StalledClient {
  client.ws.pause();
  const sock = sockets.get(device);
  assert.ok(sock, `the server end of ${device}'s socket`);
  return { client, sock };
}

/**
 * Connects `user`'s `device` and stops reading at once, its welcome unread: {@link stall}.
 * `on.sockets` must be {@link serverSockets} of `on.gw`, taken before the connect.
 */
export async function connectStalled(
  on: { readonly gw: Pick<GatewayFixture, 'connect'>; readonly sockets: ReadonlyMap<string, Duplex> }, user: string, device: string,
): Promise<StalledClient> {
  return stall(await on.gw.connect(user, { device }), on.sockets, device);
}

/** What the server's ends of these stalled clients' sockets hold now: their `writableLength` summed, bytes. */
export function heldBy(stalled: Iterable<Pick<StalledClient, 'sock'>>): number {
  let sum = 0;
  for (const s of stalled) sum += s.sock.writableLength;
  return sum;
}

/** The high-water mark of {@link startStallingGateway}'s connections, bytes. */
export const STALL_HIGH_WATER = 64 * 1024;

/**
 * A gateway (on a private redis-server) whose connections pause at a 64 KiB
 * high-water mark and close at 256 KiB, never for staying paused within
 * `pausedTimeoutMs`, with no read cache: what a catch-up held back by a client that
 * stopped reading needs. `overrides` adds to or replaces these settings.
 */
export async function startStallingGateway(t: CleanupContext, overrides: ConfigOverrides = {}): Promise<{ redis: RedisServer; gw: GatewayFixture; sockets: Map<string, Duplex> }> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const gw = await startGateway(t, {
    redisUrl: redis.url, storeDurability: 'relaxed', socketHighWaterBytes: String(STALL_HIGH_WATER), socketHardCapBytes: String(256 * 1024),
    pausedTimeoutMs: '600s', storeCacheBytes: '0', ...overrides,
  });
  return { redis, gw, sockets: serverSockets(gw) };
}

/** `pixiu_ws_frames_sent_total{t}` from the gateway's /metrics: the frames of type `t` handed to sockets so far. */
export async function framesSent(gw: Pick<InProcessServer, 'client'>, t: string): Promise<number> {
  const text = (await gw.client.get('/metrics', { headers: { authorization: '' } })).text;
  return Number(new RegExp(`^pixiu_ws_frames_sent_total\\{t="${t}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
}

/**
 * The gap counters of `gw`'s `/metrics` (docs/api.md "GET /metrics"): `seqs <reason>`
 * and `frames <reason>` (`pixiu_delivery_gap_seqs_total` and `pixiu_delivery_gaps_total`
 * for trimmed, expired, undeliverable), `broadcast` (`pixiu_broadcast_gaps_total`) and
 * `channel` (`pixiu_channel_gaps_total`); a series the node does not show is undefined.
 */
export async function gapCounts(gw: Pick<InProcessServer, 'client'>): Promise<Record<string, number | undefined>> {
  const text = (await gw.client.get('/metrics', { headers: { authorization: '' } })).text;
  const counts: Record<string, number | undefined> = {};
  for (const reason of ['trimmed', 'expired', 'undeliverable']) {
    counts[`seqs ${reason}`] = metricSample(text, `pixiu_delivery_gap_seqs_total{reason="${reason}"}`);
    counts[`frames ${reason}`] = metricSample(text, `pixiu_delivery_gaps_total{reason="${reason}"}`);
  }
  counts.broadcast = metricSample(text, 'pixiu_broadcast_gaps_total');
  counts.channel = metricSample(text, 'pixiu_channel_gaps_total');
  return counts;
}

/**
 * `pixiu_ws_closes_total` by its `code` label (a close code, or `other`), from the
 * gateway's `/metrics`: of the closes the server decided (`by="server"`), or with `by`
 * 'client' of the others, or with 'any' of both; a code not yet counted is absent
 * (the series /metrics starts at 0, src/api/metrics.ts, are left out).
 */
export async function closesByCode(gw: Pick<InProcessServer, 'client'>, by: 'server' | 'client' | 'any' = 'any'): Promise<Record<string, number>> {
  const text = (await gw.client.get('/metrics', { headers: { authorization: '' } })).text;
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^pixiu_ws_closes_total\{code="([^"]*)",by="(server|client)"\} (\d+)/gm)) {
    if ((by !== 'any' && m[2] !== by) || m[3] === '0') continue;
    counts[m[1] as string] = (counts[m[1] as string] ?? 0) + Number(m[3]);
  }
  return counts;
}
