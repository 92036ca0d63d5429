/**
 * A `sub` with `since` whose history catch-up is held back by the client (paused by
 * backpressure) while live publications arrive and the history's cap trims past
 * them (src/streams/follower.ts): the live ones must still all arrive, in order, after
 * the history — they were published after the subscription. Before the fix the
 * catch-up's next page jumped over them and they were dropped as "already sent" (a
 * fresh review: p1 – p3 of p1 – p5 lost, every run).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { publish, publishMany } from './channel-fixture.js';
import { connectViewer, pausableGatewayForFile, pauseThenCatchUp } from './paused-catch-up.js';

const gateway = pausableGatewayForFile();

test('live publications that arrive while a paused catch-up waits, and that the history trims, all arrive after the history, in order', { timeout: 60_000 }, async () => {
  const p = gateway();
  const { gw } = p;
  const client = await connectViewer(p);
  for (const h of ['h1', 'h2', 'h3']) await publish(gw.client, 'c.x', h);

  // The client stops reading; live publications on another channel fill its socket
  // past the high-water mark: the connection is paused.
  await pauseThenCatchUp(p, client);
  // Live now, and queued behind the catch-up; the history (cap 3) keeps p3..p5.
  await publishMany(gw.client, 'c.x', 5, (i) => `p${i}`);

  client.ws.resume();
  const marker = await publish(gw.client, 'c.x', 'marker');
  const got: string[] = [];
  for (;;) {
    const f = await client.next(20_000);
    if (f.t !== 'pub' || f.channel !== 'c.x') continue;
    got.push(f.data as string);
    if (f.id === marker) break;
  }
  assert.deepEqual(got, ['h1', 'h2', 'h3', 'p1', 'p2', 'p3', 'p4', 'p5', 'marker']);
});
