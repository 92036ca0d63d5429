/**
 * docs/protocol.md ("Channels", `since`): publications made after the `sub` took effect
 * arrive even when the history trimmed them before the catch-up reached them. The
 * catch-up reads the history on the command connection while live publications come
 * on the subscriber connection, and nothing orders the two (a burst backing up the
 * subscriber socket, Pub/Sub carried over a Redis Cluster's bus). The catch-up now
 * reads the history only up to the newest id read after the join and leaves the rest
 * to the live feed; before, live copies that lagged behind a history page which jumped
 * over them (trimmed) were dropped as already sent, lost without a signal.
 *
 * The lag is simulated in-process: the node's `message` events for the test channel's
 * topic are re-emitted 1.5 s late, in order (nothing else changes).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { publish, publishMany } from './channel-fixture.js';
import { connectViewer, pausableGatewayForFile, pauseThenCatchUp } from './paused-catch-up.js';

const gateway = pausableGatewayForFile();
const LAG_MS = 1500;
const TOPIC = 'px:ch:c.x';
let lagging = false;

// Pub/Sub lag on the node's subscriber connection, for TOPIC only, order kept.
const emit = Redis.prototype.emit;
let chain = Promise.resolve();
Redis.prototype.emit = function (this: Redis, event: string | symbol, ...args: unknown[]): boolean {
  if (lagging && event === 'message' && args[0] === TOPIC) {
    chain = chain.then(() => new Promise((r) => setTimeout(r, LAG_MS))).then(() => { emit.call(this, event, ...args); });
    return true;
  }
  return emit.call(this, event, ...args);
} as typeof Redis.prototype.emit;

after(() => { Redis.prototype.emit = emit; });

test('live publications whose Pub/Sub copies lag behind a history page that jumped over them still arrive', { timeout: 60_000 }, async () => {
  const p = gateway();
  const { gw } = p;
  const client = await connectViewer(p);
  for (const h of ['h1', 'h2', 'h3']) await publish(gw.client, 'c.x', h);
  await pauseThenCatchUp(p, client);
  // Published after the sub took effect; their live copies lag; the history (cap 3) keeps p3..p5.
  lagging = true;
  await publishMany(gw.client, 'c.x', 5, (i) => `p${i}`);
  client.ws.resume();
  const got: string[] = [];
  for (;;) {
    const f = await client.next(20_000);
    if (f.t !== 'pub' || f.channel !== 'c.x') continue;
    got.push(f.data as string);
    if (f.data === 'p5' && got.length >= 5) {
      // Until every lagging copy has been handed over (the chain of re-emissions settles).
      for (let settled = chain; ; settled = chain) {
        await settled;
        if (settled === chain) break;
      }
      break;
    }
  }
  lagging = false;
  for (;;) {
    client.send({ t: 'ping' });
    const f = await client.next(20_000);
    if (f.t === 'pong') break;
    if (f.t === 'pub' && f.channel === 'c.x') got.push(f.data as string);
  }
  assert.deepEqual(got, ['h1', 'h2', 'h3', 'p1', 'p2', 'p3', 'p4', 'p5']);
});
