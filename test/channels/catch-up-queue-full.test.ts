/**
 * Channels are at-most-once (DESIGN.md §8; docs/protocol.md, "Channels"): the live
 * publications queued behind a `since` catch-up that a slow client holds back are kept
 * up to 10,000 per connection, and past that the oldest are dropped, so the node's
 * memory stays bounded — told with one `gap {stream: "channel"}` in their place (it
 * was none: they were dropped without a frame). What is kept arrives in id order,
 * each once, and the publications after it still arrive.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { publish } from './channel-fixture.js';
import { connectViewer, pausableGatewayForFile, pauseThenCatchUp } from './paused-catch-up.js';

const LIVE = 10_050;
const gateway = pausableGatewayForFile({ pausedTimeout: '120s' });

test(`${LIVE} live publications behind a held-back catch-up: the oldest past 10,000 are dropped, told as a gap; the rest arrive in order, once each`, { timeout: 110_000 }, async () => {
  const p = gateway();
  const { gw, probe } = p;
  const client = await connectViewer(p);
  const history: string[] = [];
  for (const h of ['h1', 'h2', 'h3']) history.push(await publish(gw.client, 'c.x', h));
  await pauseThenCatchUp(p, client);
  // Live publications, straight into Redis (fast) as channel-publish-3 did: no trim recorded, which changes
  // nothing here — the catch-up read its one page (h1..h3) before any of these was made.
  const ids: string[] = [];
  const topic = 'px:ch:c.x';
  const hist = 'px:ch:{c.x}:history';
  for (let i = 0; i < LIVE; i += 500) {
    const m = probe.multi();
    for (let j = i; j < Math.min(LIVE, i + 500); j++) {
      m.eval("local id = redis.call('XADD', KEYS[1], 'MAXLEN', '3', '*', 'p', ARGV[2]); redis.call('PUBLISH', ARGV[1], id .. '|' .. ARGV[2]); return id",
        1, hist, topic, `{"type":"chat.line","ts":1,"data":"p${j}"}`);
    }
    for (const [err, id] of (await m.exec()) ?? []) { assert.equal(err, null); ids.push(id as string); }
  }
  client.ws.resume();
  const marker = await publish(gw.client, 'c.x', 'marker');
  const got: string[] = [];
  const other: unknown[] = [];
  for (;;) {
    const f = await client.next(30_000);
    if (f.t === 'pub' && f.channel === 'c.x') { got.push(f.id as string); if (f.id === marker) break; continue; }
    if (f.t === 'gap') got.push(`gap ${f.from as string} ${f.to as string}`);
    if (f.t !== 'pub') other.push(f);
  }
  const live = got.filter((id) => ids.includes(id));
  const dropped = ids.length - live.length;
  assert.ok(dropped > 0 && dropped <= 100, `the queue holds 10,000: ${dropped} of ${LIVE} dropped`);
  assert.deepEqual(live, ids.slice(dropped), 'the oldest are the ones dropped; the rest arrive in order, once each');
  // The catch-up's one page held h1..h3 (read before the pause); the dropped ones are one gap after them, before the first kept.
  const gap = { t: 'gap', stream: 'channel', channel: 'c.x', from: history[2], to: ids[dropped] };
  assert.deepEqual(other, [{ t: 'subscribed', channel: 'c.x', since: '0-0' }, gap], 'no frame but the sub\'s answer, the gap and pub');
  assert.deepEqual(got.slice(0, 4), [...history, `gap ${gap.from} ${gap.to}`], 'the gap comes after the history, in place of what is gone');
});
