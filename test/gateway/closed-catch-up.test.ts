/**
 * Review finding (src/streams/follower.ts catchUp, with WsConnection.whenWritable): a
 * `last_bseq` catch-up waiting on backpressure is woken when its connection closes,
 * and then reads the rest of the history from Redis page after page for a connection
 * that is gone (whenWritable answers undefined once closed, and sends are dropped), up
 * to the whole retained stream (10,000 × up to 64 KiB by default). A client that
 * connects with an old `last_bseq` and goes away costs the node and Redis that much,
 * again on every attempt.
 *
 * Measured with Redis's own counters: XRANGE calls and output bytes in the seconds
 * after the client is gone, against what was still unread then.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { STALL_HIGH_WATER, stall, startStallingGateway, type GatewayFixture } from './gateway-fixture.js';
import { appendBroadcasts, postBroadcast } from '../broadcast/broadcast-fixture.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BIG = 'x'.repeat(30 * KiB);
const COUNT = 3000;

const cleanup = cleanupList();
let gw: GatewayFixture;
let probe: Redis;
let sockets: Map<string, Duplex>;

before(async () => {
  let redis: RedisServer;
  ({ redis, gw, sockets } = await startStallingGateway(cleanup));
  ({ redis: probe } = await openInbox(cleanup, redis.url, 'probe:'));
});

after(() => cleanup.run());

async function stats(): Promise<{ xrange: number; outBytes: number }> {
  const cmd = await probe.info('commandstats');
  const st = await probe.info('stats');
  const xrange = Number(/cmdstat_xrange:calls=(\d+)/.exec(cmd)?.[1] ?? 0);
  const outBytes = Number(/total_net_output_bytes:(\d+)/.exec(st)?.[1] ?? 0);
  return { xrange, outBytes };
}

test('a paused last_bseq catch-up stops reading the stream once its connection is gone', { timeout: 600_000 }, async () => {
  const first = await postBroadcast(gw.client, { data: { first: true } });
  // Appended to the stream, 100 to a round trip (the route is not what is measured).
  await appendBroadcasts(probe, COUNT, (i) => ({ i, pad: BIG }));
  const { client } = await gw.connectWelcomed('leaver', { device: 'leaver', params: { last_bseq: first.bseq } });
  const { sock } = stall(client, sockets, 'leaver');
  await waitUntil('the server queues more than the high-water mark', async () => sock.writableLength > STALL_HIGH_WATER, 30_000, 5);
  // Let the kernel's buffers fill to their most (autotuning), so the catch-up is stuck.
  await waitUntil('the catch-up stuck', async () => {
    const a = await stats();
    await delay(1000);
    const b = await stats();
    return a.xrange === b.xrange;
  }, 60_000, 0);
  const atClose = await stats();
  client.ws.terminate();
  await waitUntil('the server saw the close', async () => sock.destroyed, 10_000, 10);
  // Nothing to wait on: a catch-up that goes on reads its next page (~6 MiB, past the
  // bound) as soon as the close wakes it; without the stop it read all 14 pages left
  // (82 MiB) within this second.
  await delay(1000);
  const later = await stats();
  const reads = later.xrange - atClose.xrange;
  const bytes = later.outBytes - atClose.outBytes;
  assert.ok(reads <= 1 && bytes < 2 * MiB, `the catch-up of a closed connection read ${reads} more pages (${(bytes / MiB).toFixed(1)} MiB) from Redis`);
});
