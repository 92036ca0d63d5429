/**
 * A node's broadcast reader that falls behind the stream's cap (src/broadcast/reader.ts):
 * its fan-out waits on the rate limit (`PIXIU_BROADCAST_RATE`) while a burst of
 * broadcasts passes the cap (`PIXIU_BROADCAST_STREAM_CAP`), so some are trimmed before
 * it reads them. Every connection must be told with a `gap {stream: "broadcast"}` in
 * their place — before this, all of them vanished silently (a fresh tester: 1,528 of
 * 3,000 broadcasts, from every connection, with no frame, log line or metric).
 *
 * Made to happen every run: at 100 frames/s, one broadcast to 60 connections keeps the
 * fan-out busy ~0.55 s, while 12 more posted at once are stored in far less; with a cap
 * of 3, the first 9 of them are gone when the reader comes back. A client that comes
 * back with `last_bseq` meanwhile must be told the same way. And only then: a reader
 * behind by exactly the cap (the last broadcast it handed out is the newest trimmed, all
 * after it retained) lost nothing, and no connection is told a gap.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanupList, type PixiuClient, type ServeProcess } from '../harness/pixiu-server.js';
import { compareStreamIds } from '../../src/streams/stream-id.js';
import { TestClient, testToken, type Frame } from '../harness/ws-client.js';
import { JWT_KEY } from '../gateway/gateway-fixture.js';
import { expectFrame, inBatches, nextBcast, postBroadcast, serveBroadcastsAlone } from './broadcast-fixture.js';

const CLIENTS = 60;
const BURST = 12;

const cleanup = cleanupList();
let serve: ServeProcess;
let api: PixiuClient;

before(async () => {
  ({ serve, api } = await serveBroadcastsAlone(cleanup, { PIXIU_BROADCAST_RATE: '100', PIXIU_BROADCAST_STREAM_CAP: '3' }));
});

after(() => cleanup.run());

/**
 * Checks a connection's feed against what was posted: each posted bseq arrives as a
 * `bcast`, in order, unless a `gap` before it covers it (after its `from`, before its
 * `to`); nothing else. Returns how many gaps it held.
 */
function checkFeed(frames: readonly Frame[], posted: readonly string[]): number {
  let next = 0;
  let gaps = 0;
  for (const f of frames) {
    if (f.t === 'gap') {
      assert.equal(f.stream, 'broadcast', JSON.stringify(f));
      gaps += 1;
      while (next < posted.length && compareStreamIds(posted[next] as string, f.to as string) < 0) {
        assert.ok(compareStreamIds(posted[next] as string, f.from as string) > 0, `the gap ${JSON.stringify(f)} covers ${posted[next]}, already due before it`);
        next += 1;
      }
    } else {
      assert.equal(f.t, 'bcast', JSON.stringify(f));
      assert.equal(f.bseq, posted[next], `expected ${posted[next]} or a gap covering it, got ${f.bseq}`);
      next += 1;
    }
  }
  assert.equal(next, posted.length, `${posted.length - next} posted broadcasts neither arrived nor were covered by a gap`);
  return gaps;
}

/** {@link CLIENTS} connections of users `<prefix>-<i>`, each welcomed, closed when the file ends. */
function connectMany(prefix: string): Promise<TestClient[]> {
  return inBatches(Array.from({ length: CLIENTS }, (_, i) => i), 20, async (i) => {
    const client = await TestClient.connect(serve.url, { token: await testToken(JWT_KEY, `${prefix}-${i}`), timeoutMs: 30_000 });
    cleanup.after(() => client.close());
    await expectFrame(client, 'welcome');
    return client;
  });
}

test('broadcasts trimmed before the node read them reach every connection as a gap, in their place; the rest arrive in order', { timeout: 90_000 }, async () => {
  const clients = await connectMany('behind');
  const first = await postBroadcast(api, { data: { i: 0 } });
  // The fan-out has started on it (its first chunk went out) before the burst.
  assert.equal((await nextBcast(clients[0] as TestClient)).bseq, first.bseq);
  const burst = (await Promise.all(Array.from({ length: BURST }, (_, i) => postBroadcast(api, { data: { i: i + 1 } }))))
    .map((p) => p.bseq)
    .sort(compareStreamIds);
  const posted = [first.bseq, ...burst];
  const last = posted[posted.length - 1] as string;
  // A client back with last_bseq while the reader is still behind: a catch-up that
  // read the history past where the reader was skipped what the reader then lost,
  // with no gap (a fresh tester's finding).
  const late = await TestClient.connect(serve.url, {
    token: await testToken(JWT_KEY, 'behind-late'), params: { last_bseq: first.bseq }, timeoutMs: 30_000,
  });
  cleanup.after(() => late.close());
  await expectFrame(late, 'welcome');

  let gaps = 0;
  for (const c of clients) {
    // Until the last broadcast arrives (or a gap past it, which would fail the check).
    while (!c.frames.some((f) => f.bseq === last || (f.t === 'gap' && compareStreamIds(f.to as string, last) > 0))) await c.nextOf('bcast');
    gaps += checkFeed(c.frames.slice(1), posted);
  }
  assert.ok(gaps >= CLIENTS, `${gaps} gaps over ${CLIENTS} connections: the reader did not fall behind (the test did not test it)`);
  while (!late.frames.some((f) => f.bseq === last || (f.t === 'gap' && compareStreamIds(f.to as string, last) > 0))) await late.nextOf('bcast');
  assert.ok(checkFeed(late.frames.slice(1), burst) >= 1, 'the late client is told of what it cannot get');
  const metrics = await api.get('/metrics');
  assert.match(metrics.text, /^pixiu_broadcast_reader_losses_total [1-9]/m);
});

test('a reader behind by exactly the cap lost nothing (the last broadcast it handed out was trimmed, every later one is retained): no gap, no loss counted', { timeout: 90_000 }, async () => {
  const clients = await connectMany('exact');
  const losses = (await api.get('/metrics')).text.match(/^pixiu_broadcast_reader_losses_total (\d+)/m)?.[1];
  const first = await postBroadcast(api, { data: { exact: 0 } });
  assert.equal((await nextBcast(clients[0] as TestClient)).bseq, first.bseq);
  // Exactly the cap (3) more, posted at once (three POSTs one after another could outlast
  // the fan-out on a loaded box), while the fan-out of `first` holds the reader: the
  // stream's newest trimmed entry is then `first` itself, the last one the reader handed
  // out, and nothing after it is gone.
  const burst = (await Promise.all([1, 2, 3].map((i) => postBroadcast(api, { data: { exact: i } }))))
    .map((p) => p.bseq)
    .sort(compareStreamIds);
  const got = (c: TestClient, bseq: string): boolean => c.frames.some((f) => f.bseq === bseq);
  assert.ok(clients.some((c) => !got(c, first.bseq)), 'the fan-out of the first broadcast was still going when the others were posted (the test did not test it)');
  const last = burst[burst.length - 1] as string;
  for (const c of clients) {
    while (!got(c, last)) await c.nextOf('bcast');
    assert.deepEqual(c.frames.slice(1).map((f) => [f.t, f.bseq]), [first.bseq, ...burst].map((b) => ['bcast', b]), 'every broadcast, in order, no gap');
  }
  const metrics = await api.get('/metrics');
  assert.equal(metrics.text.match(/^pixiu_broadcast_reader_losses_total (\d+)/m)?.[1], losses, 'no loss counted');
});
