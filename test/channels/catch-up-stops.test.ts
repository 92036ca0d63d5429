/**
 * A `sub` with `since` whose history catch-up is held back by a slow client (paused by
 * backpressure) stops reading the history when the connection closes
 * (src/channels/connection-channels.ts `closeAll`): woken by the close, it would
 * otherwise read every page left of the history from Redis for a connection that is
 * gone. Measured with Redis's own XRANGE counter; the node's channel reads are the
 * only XRANGEs on this private Redis (no broadcasts, no inbox traffic). As for a
 * broadcast catch-up (test/gateway/closed-catch-up.test.ts), the one read the close
 * may find already under way is allowed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { waitUntil } from '../harness/checks.js';
import { inBatches } from '../broadcast/broadcast-fixture.js';
import { publish, waitTopics } from './channel-fixture.js';
import { connectViewer, pausableGatewayForFile, pauseThenCatchUp } from './paused-catch-up.js';

/** A catch-up of the whole history is 10 pages of 100. */
const HISTORY = 1000;
const gateway = pausableGatewayForFile({ history: HISTORY });

async function xrangeCalls(probe: Redis): Promise<number> {
  return Number(/cmdstat_xrange:calls=(\d+)/.exec(await probe.info('commandstats'))?.[1] ?? 0);
}

test('a connection that closes while its channel catch-up waits on backpressure reads no further pages of the history', { timeout: 60_000 }, async () => {
  const p = gateway();
  const { gw, probe } = p;
  const client = await connectViewer(p);
  await inBatches(Array.from({ length: HISTORY }, (_, i) => i), 16, (i) => publish(gw.client, 'c.x', i));
  const sock = await pauseThenCatchUp(p, client);
  const atClose = await xrangeCalls(probe);
  client.ws.terminate();
  await waitUntil('the server saw the close', async () => sock.destroyed, 10_000, 10);
  // The close leaves the node's channels; a catch-up still going reads on meanwhile.
  await waitTopics(probe, 'px:', { 'c.x': false, 'c.fill': false });
  const reads = await xrangeCalls(probe) - atClose;
  assert.ok(reads <= 1, `the catch-up of a closed connection read ${reads} more pages of the history`);
});
