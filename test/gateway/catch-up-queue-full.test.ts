/**
 * Review finding (src/streams/follower.ts MAX_CATCH_UP_QUEUE): live broadcasts that
 * arrive while a connection's `last_bseq` catch-up is held back by backpressure are
 * queued in its StreamFollower, at most 10,000; past that the oldest are dropped with
 * `this.#queue.shift()` — no `gap` is ever sent for them, and the catch-up stops at
 * where the live feed began, so nothing reads them again. docs/protocol.md promises
 * "Nothing skipped silently" and that broadcasts published after connecting "are
 * queued during the catch-up and go out in bseq order with the pages".
 *
 * Setup as in catch-up-pace.test.ts (but ~88 MiB, more than the kernel buffers grow to): ~88 MiB of missed broadcasts so the catch-up
 * pauses (the client stops reading), then 10,600 live broadcasts, then the client
 * reads on. Expected: every broadcast, in order, or a gap where any is missing. The
 * missed and live ones are appended to the stream (appendBroadcasts: what is under test
 * is the follower's queue, not the route); `first` and the marker are posted.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { STALL_HIGH_WATER, stall, startStallingGateway, type GatewayFixture } from './gateway-fixture.js';
import type { Redis } from 'ioredis';
import type { RedisServer } from '../harness/redis-server.js';
import { appendBroadcasts, postBroadcast } from '../broadcast/broadcast-fixture.js';

const KiB = 1024;
const BIG = 'x'.repeat(60 * KiB);
const COUNT = 1500;
const LIVE = 10_600;

const cleanup = cleanupList();
let gw: GatewayFixture;
let sockets: Map<string, Duplex>;
let admin: Redis;

before(async () => {
  let redis: RedisServer;
  ({ redis, gw, sockets } = await startStallingGateway(cleanup, { broadcastStreamCap: '100000', broadcastRate: '10000000' }));
  ({ redis: admin } = await openInbox(cleanup, redis.url));
});

after(() => cleanup.run());

test(`live broadcasts queued behind a paused last_bseq catch-up: more than 10,000 (plus a catch-up page) are not dropped silently`, { timeout: 600_000 }, async () => {
  const first = await postBroadcast(gw.client, { data: { first: true } });
  const missed = await appendBroadcasts(admin, COUNT, (i) => ({ i, pad: BIG }));
  const { client } = await gw.connectWelcomed('returning', { device: 'returning', params: { last_bseq: first.bseq } });
  const { sock } = stall(client, sockets, 'returning');
  await waitUntil('the server queues more than the high-water mark', async () => sock.writableLength > STALL_HIGH_WATER, 20_000, 5);
  const live = await appendBroadcasts(admin, LIVE, (i) => ({ live: i }));
  // Posted once every live one was answered: the highest bseq, read last.
  const marker = await postBroadcast(gw.client, { data: { marker: true } });
  live.push(marker);
  client.ws.resume();
  const frames: { t: string; bseq?: string; from?: string; to?: string }[] = [];
  for (;;) {
    const f = await client.next(30_000);
    frames.push(f as never);
    if (f.t === 'bcast' && f.bseq === marker.bseq) break;
  }
  const gaps = frames.filter((f) => f.t === 'gap');
  const got = frames.filter((f) => f.t === 'bcast').map((f) => f.bseq);
  const expected = [...missed, ...live].map((p) => p.bseq);
  const gotSet = new Set(got);
  const lost = expected.filter((b) => !gotSet.has(b));
  assert.ok(lost.length === 0 || gaps.length > 0, `${lost.length} of ${expected.length} broadcasts skipped with no gap frame (first: ${lost[0]}; received ${got.length})`);
  await client.close();
});
