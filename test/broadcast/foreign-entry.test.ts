/**
 * Entries another program wrote into the broadcast stream (`px:broadcast`, raw XADD on
 * a private redis-server) whose time (`s`) is no number or whose data (`d`) is not
 * JSON text: their frame would be `"ts":NaN` or `"data":hello`, not JSON, written to
 * every matching connection and every catch-up, where a client's JSON.parse throws (a
 * reviewer's finding). They are malformed entries like one missing a field: the
 * node's reader logs `malformed broadcast entry skipped` with the bseq and sends them
 * to no one; a catch-up reads past them; the broadcasts around them arrive as usual.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { expectFrame, postBroadcast, readerBlocked } from './broadcast-fixture.js';

const cleanup = cleanupList();
const { logger, lines } = capturingLogger();
let gw: GatewayFixture;
let admin: Redis;

before(async () => {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' }, logger);
  admin = (await openInbox(cleanup, redis.url)).redis;
});

after(() => cleanup.run());

/** Reads frames up to the `bcast` of `bseq` (included); every one must be JSON. */
async function framesUntil(client: TestClient, bseq: string): Promise<Array<Record<string, unknown>>> {
  const seen: Array<Record<string, unknown>> = [];
  for (;;) {
    const f = await client.next();
    assert.notEqual(f.t, '(not json)', `a frame that is not JSON: ${JSON.stringify(f)}`);
    seen.push(f);
    if (f.t === 'bcast' && f.bseq === bseq) return seen;
  }
}

test('a foreign entry whose time is no number or whose data is not JSON is sent to no one, live or on catch-up, and logged', async () => {
  const live = await gw.connect('foreign-live');
  await expectFrame(live, 'welcome');
  const first = await postBroadcast(gw.client, { data: { n: 1 } });
  const fields = (s: string, d: string): string[] => ['m', '0300000000000001', 'y', 'foreign', 's', s, 'd', d];
  const badTime = await admin.xadd('px:broadcast', '*', ...fields('soon', '{}')) as string;
  const badData = await admin.xadd('px:broadcast', '*', ...fields(String(Date.now()), 'hello')) as string;
  await readerBlocked(admin);
  const last = await postBroadcast(gw.client, { data: { n: 2 } });
  const bcasts = (frames: Array<Record<string, unknown>>): unknown[] => frames.map((f) => (f.t === 'bcast' ? f.bseq : JSON.stringify(f)));
  // Live: the broadcasts around them, nothing else (no gap: nothing a producer posted is missing).
  assert.deepEqual(bcasts(await framesUntil(live, last.bseq)), [first.bseq, last.bseq]);
  // On catch-up from before them: the same.
  const back = await gw.connect('foreign-back', { params: { last_bseq: '0-0' } });
  await expectFrame(back, 'welcome');
  assert.deepEqual(bcasts(await framesUntil(back, last.bseq)), [first.bseq, last.bseq]);
  const skipped = lines.filter((l) => l.msg === 'malformed broadcast entry skipped').map((l) => l.bseq);
  assert.deepEqual(skipped, [badTime, badData]);
  await live.close();
  await back.close();
});
