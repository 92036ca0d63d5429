/**
 * A slow reader of a catch-up is alive (protocol.md "Liveness and expiry", walk20 2a):
 * a client catching up on missed broadcasts (`last_bseq`) sends nothing (it has
 * nothing to ack), and the server's WebSocket pings wait behind the backlog queued for
 * it, so its pongs come late — later than the idle timeout for a client that reads
 * slowly. Its reading is what keeps it: a write done while delivery to it is paused
 * (only the client's reading makes room then) counts as hearing from it, and a paused
 * connection is judged by `PIXIU_PAUSED_TIMEOUT`, not the idle clock. Here the idle
 * timeout is 500 ms and the client reads one socket read (up to 64 KiB) every 20 ms
 * for four idle timeouts, in the middle of a ~24 MiB catch-up; a client that reads
 * nothing is still closed. Real sockets, a private redis-server. This end-to-end case
 * passes without the rule too (its pauses end only for the moment between two frames of
 * the catch-up, and its late pongs come at its reading's pace, 2026-12-07 pausetidy):
 * test/unit/connection-pauses.test.ts is the one that fails without it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Duplex } from 'node:stream';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';
import { STALL_HIGH_WATER, closesByCode, stall, startStallingGateway, type GatewayFixture, type StalledClient } from './gateway-fixture.js';
import { appendBroadcasts, postBroadcast, type Posted } from '../broadcast/broadcast-fixture.js';

const KiB = 1024;
const IDLE_MS = 500;
const PAUSED_MS = 3000;
/** 400 entries of 60 KiB: more than the loopback kernel buffers take in the slow phase. */
const COUNT = 400;
const BIG = 'x'.repeat(60 * KiB);

const cleanup = cleanupList();
let gw: GatewayFixture;
let sockets: Map<string, Duplex>;
let admin: Redis;
let first: Posted;
let missed: Posted[];

before(async () => {
  let redis: RedisServer;
  ({ redis, gw, sockets } = await startStallingGateway(cleanup, {
    heartbeatMs: String(IDLE_MS / 5), idleTimeoutMs: String(IDLE_MS), pausedTimeoutMs: String(PAUSED_MS),
  }));
  ({ redis: admin } = await openInbox(cleanup, redis.url));
  first = await postBroadcast(gw.client, { data: { first: true } });
  missed = await appendBroadcasts(admin, COUNT, (i) => ({ i, pad: BIG }));
});

after(() => cleanup.run());

/**
 * Connects catching up from the first broadcast, reads the welcome and stops reading
 * ({@link stall}), then waits until the server queues more than the high-water mark for it.
 */
async function stalledCatchUp(device: string): Promise<StalledClient> {
  const { client } = await gw.connectWelcomed(device, { device, params: { last_bseq: first.bseq } });
  const stalled = stall(client, sockets, device);
  await waitUntil('the server queues more than the high-water mark', async () => stalled.sock.writableLength > STALL_HIGH_WATER, 30_000, 5);
  return stalled;
}

test('a client reading a catch-up slowly for four idle timeouts, sending nothing, keeps its connection and gets every broadcast', async (t) => {
  const { client, sock } = await stalledCatchUp('slow');
  const raw = (client.ws as unknown as { _socket: Duplex })._socket;
  let closed: { code: number } | undefined;
  void client.closed.then((c) => { closed = c; });
  const bcasts = (): number => client.frames.filter((f) => f.t === 'bcast').length;
  const started = performance.now();
  while (performance.now() - started < 4 * IDLE_MS && closed === undefined) {
    // One read of what the kernel holds for it (up to 64 KiB), then a pause.
    const read = new Promise((resolve) => raw.once('data', resolve));
    client.ws.resume();
    await Promise.race([read, client.closed]);
    client.ws.pause();
    await sleep(20);
  }
  t.diagnostic(`slowly read ${bcasts()} of ${COUNT} in ${(performance.now() - started).toFixed(0)} ms; the server still queues ${sock.writableLength} bytes`);
  assert.equal(closed, undefined, `closed while reading slowly, after ${bcasts()} broadcasts`);
  assert.ok(bcasts() < COUNT && sock.writableLength > 0, 'the catch-up was still going on (held back by the pause)');
  client.ws.resume();
  await waitUntil('every broadcast', async () => bcasts() === COUNT || closed !== undefined, 60_000, 10);
  assert.deepEqual(client.frames.filter((f) => f.t === 'bcast').map((f) => f.bseq), missed.map((p) => p.bseq));
  client.send({ t: 'ping' });
  await waitUntil('the pong', async () => client.frames.some((f) => f.t === 'pong'), 5000, 10);
  assert.equal(closed, undefined);
  await client.close();
});

test('a client that reads nothing of its catch-up is still closed by the server (4009 at the paused timeout)', async (t) => {
  const { client } = await stalledCatchUp('still');
  // Counted when the socket ends: the close frame waits unread, cut after the 5 s grace (CLOSE_GRACE_MS).
  // (Paused, it is judged by the paused timeout, 4009; an idle cut would be the server's 1006.)
  let closes: Record<string, number> = {};
  await waitUntil('the server closes it', async () => {
    closes = await closesByCode(gw, 'server');
    return (closes['4009'] ?? 0) + (closes['1006'] ?? 0) === 1;
  }, 2 * PAUSED_MS + 6000, 50);
  t.diagnostic(`closed by the server: ${JSON.stringify(closes)}`);
  client.ws.terminate();
});
