/**
 * Catch-ups go at the client's pace (DESIGN.md §5 "Backpressure"): the broadcasts
 * missed (`last_bseq`) — and a channel's history (`sub` with `since`), through the same
 * StreamFollower (its wait is unit-tested in test/broadcast/stream-follower.test.ts;
 * a channel's history, at most 100 × 64 KiB, fits in the kernel's buffers here) — are
 * written frame after frame while the socket takes them, and wait while delivery is
 * paused above the high-water mark: a client is never closed 4009 for the size of what
 * it asked to catch up on (only when it stays paused past `PIXIU_PAUSED_TIMEOUT`).
 * Here ~41 MiB of missed broadcasts against a 256 KiB hard cap: the client stops
 * reading until the server's queue for it is past the high-water mark (polled on the
 * server's end of the socket, seen in this process), then reads on, and gets every
 * entry on an open connection. Real sockets, a private redis-server.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { STALL_HIGH_WATER, stall, startStallingGateway, type GatewayFixture } from './gateway-fixture.js';
import { appendBroadcasts, postBroadcast } from '../broadcast/broadcast-fixture.js';

const KiB = 1024;
/**
 * Entries of ~60 KiB each: 700 of them are ~41 MiB, more than this machine's kernel
 * buffers hold for a loopback socket whose reader has stopped (up to 32 MiB received
 * and 4 MiB sent: sysctl net.ipv4.tcp_rmem / tcp_wmem), so the server queues the rest.
 */
const BIG = 'x'.repeat(60 * KiB);
const COUNT = 700;

const cleanup = cleanupList();
let gw: GatewayFixture;
let sockets: Map<string, Duplex>;

let admin: Redis;

before(async () => {
  let redis: RedisServer;
  ({ redis, gw, sockets } = await startStallingGateway(cleanup, { pausedTimeoutMs: '60s' }));
  ({ redis: admin } = await openInbox(cleanup, redis.url));
});

after(() => cleanup.run());

/**
 * Waits until the server holds more than the high-water mark for `sock` (the kernel's
 * buffers are full and delivery is paused), then reads on: `COUNT` frames of type `t`,
 * and a pong on the open connection.
 * @returns each frame's `field`
 */
async function readOnceStalled(client: TestClient, sock: Duplex, t: string, field: string): Promise<unknown[]> {
  // (Or the socket is gone: a catch-up written all at once passes the hard cap, 4009.)
  await waitUntil('the server queues more than the high-water mark', async () => sock.writableLength > STALL_HIGH_WATER || sock.destroyed, 10_000, 5);
  client.ws.resume();
  const got: unknown[] = [];
  while (got.length < COUNT) {
    const f = await client.next(20_000);
    got.push(f.t === t ? f[field] : f);
    if (f.t !== t) break;
  }
  client.send({ t: 'ping' });
  assert.deepEqual(await client.next(), { t: 'pong' }, 'the connection is open');
  return got;
}

test(`${COUNT} missed broadcasts of 60 KiB against a 256 KiB hard cap: every one arrives, the connection stays open`, async () => {
  const first = await postBroadcast(gw.client, { data: { first: true } });
  // Appended to the stream, 100 to a round trip (the catch-up's pace is under test, not the route).
  const missed = await appendBroadcasts(admin, COUNT, (i) => ({ i, pad: BIG }));
  const { client } = await gw.connectWelcomed('returning', { device: 'returning', params: { last_bseq: first.bseq } });
  const { sock } = stall(client, sockets, 'returning');
  assert.deepEqual(await readOnceStalled(client, sock, 'bcast', 'bseq'), missed.map((p) => p.bseq));
  await client.close();
});
