/**
 * docs/protocol.md ("Channels", `since`): publications made after the `sub` took
 * effect arrive even when the history trimmed them before the catch-up reached them.
 * Those made between the join and the node's read of the channel's newest id are the
 * catch-up's (at or before that id), but their live copies come on the node's
 * subscriber connection, which can lag behind the command connection (a burst backing
 * up its socket). A page that jumped over the trimmed ones went out first, and their
 * copies, arriving after, were dropped as already sent (a reviewer's C1). The node now
 * waits for a PING on its subscriber connection after that read: every copy is queued
 * before the catch-up begins.
 *
 * p1 and p2 are trimmed before the catch-up reads the history: whether anything was
 * published between the `since` and the first live copy (p1) the history no longer
 * says, so a `gap` from the `since` to p1 comes first (a channel's trimmed history is
 * told, never skipped: docs/protocol.md "Channels" says such a gap may hold nothing).
 *
 * The lag is on the socket (test/harness/lag-proxy.ts: everything Redis sends to the
 * node's subscriber connection, PING replies included, comes 1 s late); the window
 * between the join and the newest-id read is widened by publishing in it (a hook on
 * ChannelStream.newestId), as a busy channel would.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChannelStream } from '../../src/channels/channel-stream.js';
import { connectWith, publish, publishMany, subscribe } from './channel-fixture.js';
import { subscriberProxyForFile } from './subscriber-proxy.js';

const service = subscriberProxyForFile(3);

test('publications made between a sub\'s join and its newest-id read, trimmed, with lagging Pub/Sub copies, all arrive', { timeout: 30_000 }, async () => {
  const { gw, proxy } = service();
  // The node follows c.x already: the viewer's sub takes effect at its join.
  const holder = await connectWith(gw, 'holder', ['c.*']);
  await subscribe(holder, 'c.x');
  const h = await publish(gw.client, 'c.x', 'h1');
  assert.equal((await holder.next()).id, h);
  const viewer = await connectWith(gw, 'viewer', ['c.*']);

  const newestId = ChannelStream.prototype.newestId;
  let armed = true;
  const ids: string[] = [];
  ChannelStream.prototype.newestId = async function (this: ChannelStream, channel: string) {
    if (armed && channel === 'c.x') {
      armed = false;
      proxy.lag(1000);
      // After the join, before the read; the history (cap 3) keeps p3..p5 only.
      ids.push(...await publishMany(gw.client, 'c.x', 5, (i) => `p${i}`));
    }
    return newestId.call(this, channel);
  };
  try {
    assert.equal(await subscribe(viewer, 'c.x', h), h);
    const got: string[] = [];
    assert.deepEqual(await viewer.next(5000), { t: 'gap', stream: 'channel', channel: 'c.x', from: h, to: ids[0] }, 'the trim told, up to p1, the first live copy');
    while (got.length < 5) {
      // Without the barrier only p3..p5 come: the assertion below says so.
      const f = await viewer.next(5000).catch(() => undefined);
      if (f === undefined) break;
      assert.equal(f.t, 'pub', JSON.stringify(f));
      assert.equal(f.id, ids[got.length], JSON.stringify(f));
      got.push(f.data as string);
    }
    // Nothing late follows: every delayed copy was handed over, then a ping's pong.
    proxy.lag(0);
    await proxy.settled();
    viewer.send({ t: 'ping' });
    for (;;) {
      const f = await viewer.next(5000);
      if (f.t === 'pong') break;
      got.push(`${String(f.t)} ${String(f.data)}`);
    }
    assert.deepEqual(got, ['p1', 'p2', 'p3', 'p4', 'p5']);
  } finally {
    ChannelStream.prototype.newestId = newestId;
    proxy.lag(0);
  }
});
