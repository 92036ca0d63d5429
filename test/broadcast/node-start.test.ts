/**
 * A node's broadcast reader starts after the stream's end (reader.ts `start`, DESIGN.md
 * §8: broadcasts are live; the history is for a client's `last_bseq` catch-up). A
 * stream trimmed before the node started is no loss of this node's: it is not counted
 * in `pixiu_broadcast_reader_losses_total` (an alert on it would fire at every restart
 * of a node on a busy stream), and a connection's first broadcast is the next live one.
 * Once it has read everything, the reader waits in a blocking `XREAD`, also when the
 * last page it read was full.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { BroadcastStream } from '../../src/broadcast/broadcast-stream.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { expectFrame, nextBcast, postBroadcast, readerBlocked } from './broadcast-fixture.js';

const CAP = 300;
const cleanup = cleanupList();
let gw: GatewayFixture;
let admin: Redis;

before(async () => {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  // Broadcasts of an earlier run, past the cap: the stream was trimmed before this node started.
  ({ redis: admin } = await openInbox(cleanup, redis.url));
  const stream = new BroadcastStream(admin, new Keys('px:'), CAP);
  for (let counter = 1; counter <= CAP + 3; counter++) {
    await stream.publish({ msgId: encodeMsgId({ partition: 0, kind: MsgKind.broadcast, counter }), type: 'earlier', ts: Date.now(), dataJson: '{}', filter: undefined, expiresAt: Date.now() + 3_600_000 });
  }
  assert.notEqual((await stream.bounds()).maxDeleted, '0-0');
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', broadcastStreamCap: String(CAP) });
});

after(() => cleanup.run());

test('a stream trimmed before the node started is not counted as the node\'s loss, and a connection gets only live broadcasts', async () => {
  const client = await gw.connect('fresh');
  await expectFrame(client, 'welcome');
  const live = await postBroadcast(gw.client, { data: { live: true } });
  assert.equal((await nextBcast(client)).bseq, live.bseq);
  const metrics = await gw.client.get('/metrics');
  assert.match(metrics.text, /^pixiu_broadcast_reader_losses_total 0$/m);
  await client.close();
});

test('with everything read, also after a full page, the reader waits in a blocking XREAD, not reading page after page', async () => {
  // A full page (200, the reader's count) at once: the page after it is empty.
  const burst = admin.multi();
  for (let i = 0; i < 200; i++) burst.xadd('px:broadcast', '*', 'm', encodeMsgId({ partition: 0, kind: MsgKind.broadcast, counter: 1000 + i }), 'y', 'burst', 's', String(Date.now()), 'd', '{}');
  await burst.exec();
  await readerBlocked(admin);
});
