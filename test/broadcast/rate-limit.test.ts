/**
 * The per-node broadcast rate limit (DESIGN.md §8, `PIXIU_BROADCAST_RATE`): a `pixiu
 * serve` limited to 1,000 frames/s sends 50 broadcasts to 50 connections (2,500
 * frames) at that rate — measured at the clients, not far above it (nor far below) —
 * and every connection still gets every broadcast once, in order.
 *
 * The limiter is a token bucket holding 1/20 s of frames (50 here), so the bound
 * checked is the bucket's: over the whole run, frames after the first bucketful
 * arrive at ≤ 1.1 × the rate; and no one-second window holds more than the rate plus
 * a bucketful (+10 %). The lower bound is loose (0.5 × the rate): a busy machine may
 * slow the sender, never speed it up. The arrival times are this process's: when its
 * event loop is held up (other test files on the same cores), frames that came during
 * the hold are stamped together after it, so both upper bounds allow the rate's frames
 * over the longest hold measured (monitorEventLoopDelay) — a few hundred at most, where
 * a node ignoring the limit sends all 2,500 within a fraction of a second.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { cleanupList, type PixiuClient, type ServeProcess } from '../harness/pixiu-server.js';
import { compareStreamIds } from '../../src/streams/stream-id.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { JWT_KEY } from '../gateway/gateway-fixture.js';
import { bcastsUntil, expectFrame, inBatches, postBroadcast, serveBroadcastsAlone, type Posted } from './broadcast-fixture.js';

const RATE = 1000;
const BUCKET = RATE / 20;
const CLIENTS = 50;
const BROADCASTS = 50;

const cleanup = cleanupList();
let serve: ServeProcess;
let api: PixiuClient;

before(async () => {
  ({ serve, api } = await serveBroadcastsAlone(cleanup, { PIXIU_BROADCAST_RATE: String(RATE) }));
});

after(() => cleanup.run());

test(`PIXIU_BROADCAST_RATE=${RATE}: ${CLIENTS * BROADCASTS} frames arrive at about ${RATE}/s, each once and in order`, { timeout: 60_000 }, async (t) => {
  /** Arrival time of every broadcast frame, any client, ms. */
  const arrivals: number[] = [];
  const clients = await inBatches(Array.from({ length: CLIENTS }, (_, i) => i), 25, async (i) => {
    const client = await TestClient.connect(serve.url, { token: await testToken(JWT_KEY, `rate-${i}`), timeoutMs: 20_000 });
    cleanup.after(() => client.close());
    await expectFrame(client, 'welcome');
    client.ws.on('message', () => arrivals.push(performance.now()));
    return client;
  });
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  // All at once, so the limiter, not the posting, is what paces the frames; a client
  // gets them in stream order.
  const posted = (await Promise.all(Array.from({ length: BROADCASTS }, (_, i) => postBroadcast(api, { data: { i } }))))
    .sort((x, y) => compareStreamIds(x.bseq, y.bseq));
  const last = posted[posted.length - 1] as Posted;
  await Promise.all(clients.map(async (c) => assert.deepEqual(await bcastsUntil(c, last.bseq, 30_000), posted.map((p) => p.bseq))));

  loopDelay.disable();
  /** The longest this process's event loop was held up, ms: arrivals bunch over it. */
  const holdMs = loopDelay.max / 1e6;
  const n = arrivals.length;
  assert.equal(n, CLIENTS * BROADCASTS);
  const spanMs = (arrivals[n - 1] as number) - (arrivals[0] as number);
  const rate = ((n - BUCKET) * 1000) / spanMs;
  const rateAllowingHold = ((n - BUCKET) * 1000) / (spanMs + holdMs);
  let busiest = 0;
  for (let i = 0, j = 0; i < n; i++) {
    while ((arrivals[i] as number) - (arrivals[j] as number) >= 1000) j++;
    busiest = Math.max(busiest, i - j + 1);
  }
  t.diagnostic(`${n} frames over ${Math.round(spanMs)} ms: ${Math.round(rate)} frames/s after the first bucketful (limit ${RATE}); busiest 1 s window: ${busiest} frames; longest event-loop hold ${Math.round(holdMs)} ms`);
  assert.ok(rateAllowingHold <= RATE * 1.1, `${Math.round(rate)} frames/s is above the limit of ${RATE} (${Math.round(rateAllowingHold)} allowing a ${Math.round(holdMs)} ms hold)`);
  assert.ok(rate >= RATE * 0.5, `${Math.round(rate)} frames/s is far below the limit of ${RATE}`);
  const bunched = (RATE * holdMs) / 1000;
  assert.ok(busiest <= (RATE + BUCKET) * 1.1 + bunched, `${busiest} frames in one second (allowing ${Math.round(bunched)} bunched by a ${Math.round(holdMs)} ms hold)`);
});
