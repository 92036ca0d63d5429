/**
 * What the tests of a channel `since` catch-up held back by a slow client share
 * (src/streams/follower.ts, docs/protocol.md "Channels"): a gateway with a small
 * high-water mark, and a client whose connection is
 * paused by backpressure while its catch-up of `c.x` has written its first entry and
 * waits. Live publications made then queue behind the catch-up.
 */
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { Duplex } from 'node:stream';
import { Redis } from 'ioredis';
import { waitUntil } from '../harness/checks.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken, type TestClient } from '../harness/ws-client.js';
import { JWT_KEY, serverSockets, startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { publish, subscribe, waitTopics } from './channel-fixture.js';

const KiB = 1024;
/** The gateway's socket high-water mark, bytes: past it a connection is paused. */
export const HIGH_WATER = 64 * KiB;

/** A gateway set up for paused catch-ups, the test's own Redis connection, and the server side of each connection. */
export interface PausableGateway {
  readonly gw: GatewayFixture;
  /** A connection of the test's own to the gateway's Redis. */
  readonly probe: Redis;
  /** The server side of each connection, by device: to see what it has queued. */
  readonly sockets: Map<string, Duplex>;
}

/**
 * Starts a private Redis and a gateway with {@link HIGH_WATER}, a hard cap far above
 * anything sent, and publications of up to 2 MiB (the fillers). Clean-up goes to
 * `cleanup`.
 * @param opts.history publications kept per channel (default 3)
 * @param opts.pausedTimeout how long a paused connection may stay paused (a duration, default 60 s)
 */
export async function startPausableGateway(cleanup: CleanupContext, opts: { history?: number; pausedTimeout?: string } = {}): Promise<PausableGateway> {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const gw = await startGateway(cleanup, {
    redisUrl: redis.url, storeDurability: 'relaxed', channelHistory: String(opts.history ?? 3),
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(1024 * 1024 * KiB), pausedTimeoutMs: opts.pausedTimeout ?? '60s',
    // 1 MiB publications: the message limit and the body limit (1 MiB by default) above them.
    maxMessageBytes: String(2 * 1024 * KiB), maxBodyBytes: String(4 * 1024 * KiB),
  });
  const probe = new Redis(redis.url);
  cleanup.after(() => probe.quit());
  return { gw, probe, sockets: serverSockets(gw) };
}

/**
 * {@link startPausableGateway} for the tests of one file: started before them, stopped
 * after them. Answers a getter of it (valid inside a test).
 */
export function pausableGatewayForFile(opts: { history?: number; pausedTimeout?: string } = {}): () => PausableGateway {
  const cleanup = cleanupList();
  let started: PausableGateway | undefined;
  before(async () => {
    started = await startPausableGateway(cleanup, opts);
  });
  after(() => cleanup.run());
  return () => {
    assert.ok(started, 'the gateway is started before the tests');
    return started;
  };
}

/**
 * Connects device `d1` of user `viewer` from the latest, welcomed, following `c.fill`.
 * @param token its JWT; by default one allowing `c.*` for an hour
 */
export async function connectViewer(p: PausableGateway, token?: string): Promise<TestClient> {
  token ??= await testToken(JWT_KEY, 'viewer', { channels: ['c.*'] });
  const client = await p.gw.connect('viewer', { token, device: 'd1', params: { from: 'latest' } });
  assert.equal((await client.next()).t, 'welcome');
  await subscribe(client, 'c.fill');
  return client;
}

/**
 * The client stops reading; publications of 1 MiB on `c.fill` fill its socket past the
 * high-water mark, so the connection is paused. Then a `sub` of `c.x` with `since`: the
 * catch-up writes its first entry and waits for the pause to end.
 * @returns the server side of the connection
 */
export async function pauseThenCatchUp(p: PausableGateway, client: TestClient, since = '0-0'): Promise<Duplex> {
  client.ws.pause();
  const sock = p.sockets.get('d1');
  assert.ok(sock);
  const big = 'y'.repeat(1024 * KiB);
  for (let fills = 0; sock.writableLength <= HIGH_WATER; fills++) {
    assert.ok(fills < 200, 'never paused');
    await publish(p.gw.client, 'c.fill', big);
  }
  // Watched on the socket itself: the last fillers' frames may still reach it after
  // their publish answered (Pub/Sub is asynchronous), so a growth of its queue is no
  // sign of the catch-up (on a busy machine one was taken for it, the sub's history
  // was trimmed before it was read, and the test saw no h1).
  const wroteCatchUp = watchWrites(sock, `{"t":"pub","channel":"c.x",`);
  client.send({ t: 'sub', channel: 'c.x', since });
  await waitTopics(p.probe, 'px:', { 'c.x': true });
  await waitUntil('the catch-up writes its first entry', async () => wroteCatchUp(), 10_000, 5);
  return sock;
}

/**
 * Watches what the server writes on `sock` (ws writes a frame's header and its text
 * as two writes): answers whether a write began with `prefix` since the call.
 */
function watchWrites(sock: Duplex, prefix: string): () => boolean {
  let seen = false;
  const write = sock.write.bind(sock) as (...args: unknown[]) => boolean;
  sock.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (!seen && typeof chunk === 'string') seen = chunk.startsWith(prefix);
    else if (!seen && Buffer.isBuffer(chunk)) seen = chunk.toString('latin1', 0, prefix.length) === prefix;
    return write(chunk, ...rest);
  }) as Duplex['write'];
  return () => seen;
}
