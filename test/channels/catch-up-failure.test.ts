/**
 * A `sub` with `since` whose catch-up read fails is answered with an error and follows
 * nothing; docs/protocol.md ("Channels") tells the client to retry with `since` the
 * last `id` received. The live publications queued during the catch-up are dropped,
 * not sent: they were flushed before the error, so "the last id received" was a live
 * publication newer than the history the failed read never sent, and the retry, done
 * as documented, skipped that history.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { publish, publishMany } from './channel-fixture.js';
import { connectViewer, pausableGatewayForFile, pauseThenCatchUp } from './paused-catch-up.js';

const gateway = pausableGatewayForFile({ history: 300 });

test('a sub whose catch-up read fails sends no live publication before its error: a retry with since the last id received misses nothing', { timeout: 90_000 }, async (t) => {
  const p = gateway();
  const { gw, probe } = p;
  t.after(() => probe.acl('SETUSER', 'default', '+xrange'));
  const client = await connectViewer(p);
  // 150 in the history: the catch-up reads them in two pages (100, then 50).
  const history = await publishMany(gw.client, 'c.x', 150, (i) => `h${i}`);

  // The client stops reading: its connection is paused.
  await pauseThenCatchUp(p, client);
  // Live publications, queued behind the catch-up.
  const live = [await publish(gw.client, 'c.x', 'p1'), await publish(gw.client, 'c.x', 'p2')];
  // The next page's read will fail (Redis refuses XRANGE).
  await probe.acl('SETUSER', 'default', '-xrange');
  client.ws.resume();

  const firstTry: string[] = [];
  let err: Record<string, unknown> | undefined;
  for (;;) {
    const f = await client.next(20_000);
    if (f.t === 'pub' && f.channel === 'c.x') firstTry.push(f.id as string);
    if (f.t === 'error') { err = f; break; }
  }
  assert.equal(err?.code, 'UNAVAILABLE', JSON.stringify(err));
  await probe.acl('SETUSER', 'default', '+xrange');

  // The client retries as docs/protocol.md says: since the last id received.
  const since = firstTry[firstTry.length - 1] as string;
  client.send({ t: 'sub', channel: 'c.x', since });
  client.send({ t: 'ping' });
  const retry: string[] = [];
  for (;;) {
    const f = await client.next(20_000);
    if (f.t === 'pong') break;
    if (f.t === 'pub' && f.channel === 'c.x') retry.push(f.id as string);
  }
  const got = [...firstTry, ...retry];
  const missing = [...history, ...live].filter((id) => !got.includes(id));
  assert.deepEqual(missing, [],
    `received before the error: ${firstTry.length} (the last ${since === live[1] ? 'the live p2' : since}); after the retry: ${retry.length}; missing ${missing.length} of 152`);
});
