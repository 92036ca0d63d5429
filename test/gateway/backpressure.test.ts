/**
 * Backpressure on the WebSocket (DESIGN.md §5 "Backpressure", §6 close 4009) with real
 * clients that stop reading (`ws` pause: the socket stops being read, so the server's
 * send buffer fills): the connection is paused above the high-water mark, closed 4009
 * when, paused, it drains nothing for too long or passes the hard cap, resumes when the
 * client reads again (test/gateway/slow-reader.test.ts: one that reads slowly), and
 * the server's memory for it stays bounded. Each test has its own service (the limits
 * differ) on one private redis-server. Every wait is on a frame, a close, a log line,
 * or a bounded poll of the server's own send buffer (its end of the socket, seen in
 * this process).
 * One test corks the server's end instead, to hold its writes in that buffer as a full
 * kernel would at a moment loopback cannot line up.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConfigOverrides } from '../../src/config/config.js';
import { DEFAULT_PAGE_MAX as FETCH_PAGE_MAX } from '../../src/delivery/machine.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { RedisServer } from '../harness/redis-server.js';
import type { CleanupContext } from '../harness/pixiu-server.js';
import { waitUntil, within } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import type { Logger } from '../../src/logger.js';
import type { TestClient } from '../harness/ws-client.js';
import { closesByCode, connectStalled, pongsUntil, serverSockets, type GatewayFixture } from './gateway-fixture.js';
import {
  expectFrame, expectMsgs, expectWelcome, postMany, postOne, seqOf, startDelivery, waitCursor,
} from './delivery-fixture.js';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Window large enough that the socket, not the window, stops delivery (the setting's maximum). */
const WINDOW = 10_000;
/** A message's data: about 1 KiB, so a window's worth is more than the kernel's socket buffers hold. */
const bulky = (i: number): unknown => ({ i, pad: 'x'.repeat(1000) });
/** Longest `msg` frame of {@link bulky} data, bytes, with the WebSocket header. */
const MAX_FRAME_BYTES = 1200;
/**
 * Data of 30 KB: a delivery page stops at the message that reaches the connection's
 * high-water mark (connection-state.ts `deliverPage`), and once the kernel's buffers are
 * full that message takes the queue past it by up to its size; bulky's 1 KB overshoot
 * the kernel takes at once.
 */
const large = (i: number): unknown => ({ i, pad: 'x'.repeat(30_000) });
/** Longest `msg` frame of {@link large} data, bytes, with the WebSocket header. */
const LARGE_FRAME_BYTES = 30_200;

// A forced collection before each memory reading, so garbage does not hide or fake growth.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** This process's memory after a full collection, bytes. */
function memory(): { heap: number; buffers: number; rss: number } {
  // Twice: buffers are released by the first collection's weak callbacks.
  gc();
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers, rss: m.rss };
}

const mb = (bytes: number): string => `${(bytes / MiB).toFixed(1)} MiB`;

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/** A service under test, and the server's end of each upgraded socket by its `device`. */
interface Setup {
  readonly gw: GatewayFixture;
  readonly inbox: Inbox;
  readonly sockets: Map<string, Duplex>;
}

/**
 * A service with these limits, the largest window, room for 100,000 messages per inbox,
 * and no read cache (so memory readings show delivery, not the cache).
 */
async function serve(t: CleanupContext, prefix: string, limits: ConfigOverrides, logger?: Logger): Promise<Setup> {
  const { gw, inbox } = await startDelivery(t, prefix, {
    redisUrl: redis.url, storeCacheBytes: '0', deliveryWindow: String(WINDOW), inboxCap: '100000', ...limits,
  }, logger);
  const sockets = serverSockets(gw);
  return { gw, inbox, sockets };
}

/**
 * Resumes a paused client and reads what the server had buffered for it, to the close:
 * after the `welcome`, every frame must be a `msg`, seq 1, 2, 3 … with no gap or repeat.
 * @returns the close and the last seq received
 */
async function drainToClose(client: TestClient, ids: readonly string[]): Promise<{ code: number; last: number }> {
  client.ws.resume();
  const { code } = await client.waitClose(30_000);
  let last = 0;
  for (const f of client.frames) {
    if (f.t === 'welcome') continue;
    assert.equal(f.t, 'msg', JSON.stringify(f).slice(0, 200));
    assert.equal(seqOf(f), last + 1, 'in order, none skipped or repeated');
    assert.equal(f.id, ids[last]);
    last += 1;
  }
  return { code, last };
}

test('a client that stops reading while 20,000 messages are sent to it is closed 4009, memory bounded, others unaffected; reconnected it gets all 20,000', async (t) => {
  const HIGH_WATER = 64 * KiB;
  const PAUSED_MS = 300;
  // Twice the window (~23 MiB of frames): a server without backpressure would hold a
  // window's ~11 MiB for the stalled socket, far past both bounds below. More only
  // costs CPU: each message is posted and then delivered twice.
  const COUNT = 2 * WINDOW;
  const logged = capturingLogger();
  const setup = await serve(t, 'bp-slow', {
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(8 * MiB), pausedTimeoutMs: String(PAUSED_MS),
  }, logged.logger);
  const server = setup.gw;
  const ids = await postMany(server.client, 'sam', COUNT, 1, { data: bulky });
  const other = await server.connect('ola', { device: 'phone' });
  await expectWelcome(other, 1, 0);
  const base = memory();

  // The slow client stops reading at once; the server starts sending it all of them.
  const { client: slow, sock } = await connectStalled(setup, 'sam', 'slow');
  // A page stops at the message that reaches the high-water mark: once the kernel's
  // buffers are full, the queue stays between half of it (a drain resumes) and it.
  await waitUntil('the slow connection is paused (its queue held, over half the high-water mark)', async () => sock.writableLength > HIGH_WATER / 2);
  const pausedSeen = performance.now();
  const held = memory();
  const buffered = sock.writableLength;

  // Another user's delivery meanwhile: prompt.
  const posted = performance.now();
  const live = await postOne(server.client, 'ola');
  const got = await expectFrame(other, 'msg', 2000);
  const latencyMs = performance.now() - posted;
  assert.deepEqual([got.seq, got.id], [live.seq, live.id]);

  const totalBytes = COUNT * MAX_FRAME_BYTES;
  const growth = held.heap - base.heap + held.buffers - base.buffers;
  t.diagnostic(`slow socket's server send buffer while stalled: ${buffered} bytes (high-water ${HIGH_WATER}); the ${COUNT} messages ≈ ${mb(totalBytes)}`);
  t.diagnostic(`memory after GC, before the slow client → while it is stalled: heap ${mb(base.heap)} → ${mb(held.heap)}, array buffers ${mb(base.buffers)} → ${mb(held.buffers)}, rss ${mb(base.rss)} → ${mb(held.rss)}`);
  t.diagnostic(`other user's message arrived ${latencyMs.toFixed(0)} ms after its POST`);
  // Bounded: the server holds about a high-water mark for the stalled socket, not the
  // messages it has to send (without backpressure it would hold a window, ~10 MiB).
  assert.ok(buffered < HIGH_WATER + FETCH_PAGE_MAX * MAX_FRAME_BYTES, `send buffer ${buffered} bytes`);
  assert.ok(growth < totalBytes / 20, `retained growth ${mb(growth)} is well below the messages' ${mb(totalBytes)}`);

  // The client reads nothing, so once the kernel's buffers are full the queue drains
  // nothing (a first pause may still end while the kernel takes what it can): the
  // server closes it within the paused timeout and a quarter (its checks) of the last
  // drain. Waited for on its log line, before the client reads again (reading, it
  // would drain the queue and be kept).
  await waitUntil('the slow consumer is closed', async () => logged.lines.some((l) => l.msg === 'slow consumer closed'), 10_000, 10);
  t.diagnostic(`closed ${(performance.now() - pausedSeen).toFixed(0)} ms after the pause was first seen (paused timeout ${PAUSED_MS} ms)`);
  const { code, last } = await drainToClose(slow, ids);
  assert.equal(code, 4009, 'slow consumer');
  assert.ok(last < COUNT, `the stalled client got only part (${last}) before the close`);
  t.diagnostic(`before its 4009 the slow client had been sent ${last} messages`);

  const again = await server.connect('sam', { device: 'slow' });
  // It never acked: it starts from the first.
  await expectWelcome(again, 1, COUNT);
  await expectMsgs(again, 1, COUNT, ids, 1, { ackEvery: 500 });
  await waitCursor(setup.inbox, 'sam', 'slow', COUNT);
  assert.equal(await again.receivesWithin(100), false, 'nothing after the last');
});

test('a paused connection whose client reads again resumes at the drain and gets everything, without a close', async (t) => {
  const HIGH_WATER = 16 * KiB;
  const COUNT = 15_000;
  const setup = await serve(t, 'bp-drain', {
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(256 * MiB), pausedTimeoutMs: '60s',
  });
  const ids = await postMany(setup.gw.client, 'dan', COUNT, 1, { data: bulky });
  const { client, sock } = await connectStalled(setup, 'dan', 'tab');
  // A few MiB fill the kernel's buffers; then the server's own buffer passes the
  // high-water mark and the connection is paused.
  await waitUntil('the connection is paused', async () => sock.writableLength > HIGH_WATER);
  t.diagnostic(`paused with ${sock.writableLength} bytes in the server's send buffer`);
  client.ws.resume();
  await expectWelcome(client, 1, COUNT);
  // Acks do not restart a paused connection (nothing is fetched for it until the
  // drain): without the drain this stalls after the first few thousand.
  await expectMsgs(client, 1, COUNT, ids, 1, { ackEvery: 500 });
  assert.equal(await client.receivesWithin(100), false);
  assert.equal(client.ws.readyState, client.ws.OPEN, 'still open');
});

test('a pause that ended at the drain is over: the connection is not closed 4009 when the paused timeout would have run out', async (t) => {
  const HIGH_WATER = 16 * KiB;
  const PAUSED_MS = 2000;
  const COUNT = 8000;
  const setup = await serve(t, 'bp-unpause', {
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(256 * MiB), pausedTimeoutMs: `${PAUSED_MS}ms`,
  });
  const ids = await postMany(setup.gw.client, 'pat', COUNT, 1, { data: bulky });
  const { client, sock } = await connectStalled(setup, 'pat', 'tab');
  await waitUntil('the connection is paused', async () => sock.writableLength > HIGH_WATER);
  const pausedAt = Date.now();
  client.ws.resume();
  await expectWelcome(client, 1, COUNT);
  await expectMsgs(client, 1, COUNT, ids, 1, { ackEvery: 500 });
  // The drain ended the pause: its timer must be gone with it. Stay talking to the
  // server (each pong is a frame written and answered) until well past the time it
  // would have fired; a close comes first if it does.
  await pongsUntil(client, pausedAt + PAUSED_MS + 1000);
  assert.equal(client.ws.readyState, client.ws.OPEN, 'still open');
});

test('a client paused past the ack timeout that then reads and acks each message is sent no redelivery: the timeout counts from the resume', async (t) => {
  // walk20 finding 3a: the round that came due during the pause went out at the
  // resume, 54-71 copies marked `redelivered` amid the fresh stream.
  const HIGH_WATER = 64 * KiB;
  const COUNT = 400;
  const setup = await serve(t, 'bp-resume-round', {
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(256 * MiB), pausedTimeoutMs: '60s', ackTimeoutMs: '1s',
  });
  const ids = await postMany(setup.gw.client, 'rex', COUNT, 1, { data: large });
  const { client, sock } = await connectStalled(setup, 'rex', 'tab');
  await waitUntil('the connection is paused', async () => sock.writableLength > HIGH_WATER);
  // Three ack timeouts and more while paused, reading nothing: a time is what is tested
  // (rounds coming due during the pause), so a fixed wait, 3× the 1 s timeout.
  await sleep(3000);
  client.ws.resume();
  await expectWelcome(client, 1, COUNT);
  // The device takes a few ms over each message before its ack, as a real one would:
  // the socket is read (and drained) at once, and the acks lag behind it.
  for (let seq = 1; seq <= COUNT; seq++) {
    const f = await client.next();
    assert.deepEqual([f.t, f.seq, f.id, f.redelivered], ['msg', seq, ids[seq - 1], undefined], `msg ${seq}, a first delivery`);
    await sleep(5);
    client.ack(seq);
  }
  assert.equal(await client.receivesWithin(1500), false, 'no redelivery after the last ack either');
});

test('a pause that only pongs caused ends when they are written: the client then gets its messages at once, not a 4009', async (t) => {
  // The high-water mark at its least (1 KiB): a few pongs of 125-byte pings pass it.
  const HIGH_WATER = KiB;
  const PINGS = 12;
  const PING_DATA = Buffer.alloc(125, 0x70); // the most a control frame carries (RFC 6455 §5.5)
  const setup = await serve(t, 'bp-pongs', {
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(MiB), pausedTimeoutMs: '2s',
  });
  const client = await setup.gw.connect('pia', { device: 'tab' });
  await expectWelcome(client, 1, 0);
  const sock = setup.sockets.get('tab');
  assert.ok(sock, "the server end of tab's socket");
  // A client that stopped reading once the kernel's buffers were full, after every
  // frame before had been written out (no write of a frame waiting, nothing queued in
  // the server): what it is sent from now on waits in the server's own buffer. On
  // loopback that moment cannot be lined up (the kernel takes MBs), so the server's
  // end is corked: its writes wait in its buffer, as they would behind a full kernel.
  client.ws.pause();
  sock.cork();
  let pongs = 0;
  const allPongs = new Promise<void>((resolve) => client.ws.on('pong', () => {
    if (++pongs === PINGS) resolve();
  }));
  for (let i = 0; i < PINGS; i++) client.ws.ping(PING_DATA);
  // Only pongs are queued, and past the high-water mark: delivery is paused by them alone.
  await waitUntil('the pongs pause the connection', async () => sock.writableLength > HIGH_WATER);
  // The client reads again, and the server's writes reach it: the pongs go out.
  sock.uncork();
  client.ws.resume();
  await within(10_000, `the ${PINGS} pongs once the client reads again`, allPongs);
  // Written, they end the pause: a message goes out at once. (Before, only a frame
  // written with a drain callback ended a pause, and pongs had none: nothing more was
  // sent, and the connection was closed 4009 when PIXIU_PAUSED_TIMEOUT ran out.)
  const posted = await postOne(setup.gw.client, 'pia');
  const got = await expectFrame(client, 'msg', 10_000);
  assert.deepEqual([got.seq, got.id], [posted.seq, posted.id]);
  assert.equal(client.ws.readyState, client.ws.OPEN, 'still open');
});

/** The hard cap and high-water mark of {@link serveCapped}, bytes. */
const CAPPED = 64 * KiB;

/**
 * A service whose hard cap equals its high-water mark ({@link CAPPED}): no pause band,
 * so the first send past it closes 4009. With `count` bulky messages posted to `user`.
 */
async function serveCapped(t: CleanupContext, prefix: string, user: string, count: number, data = bulky): Promise<{ setup: Setup; ids: string[] }> {
  const setup = await serve(t, prefix, {
    socketHighWaterBytes: String(CAPPED), socketHardCapBytes: String(CAPPED), pausedTimeoutMs: '60s',
  });
  return { setup, ids: await postMany(setup.gw.client, user, count, 1, { data }) };
}

test('a send that takes the buffer past the hard cap closes the connection 4009 at once, and nothing is queued after it', async (t) => {
  // The hard cap equal to the high-water mark: no pause band, so the first send past it
  // closes. (With a band, whether a run ends inside it or passes the cap depends on
  // where a page ends; the paused-timeout test above covers the band.)
  const COUNT = 300;
  // ~9 MB: more than the kernel's socket buffers take from a client that does not read.
  const { setup, ids } = await serveCapped(t, 'bp-cap', 'hal', COUNT, large);
  const { client, sock } = await connectStalled(setup, 'hal', 'cap');
  await waitUntil('the send buffer passed the hard cap', async () => sock.writableLength > CAPPED);
  const buffered = sock.writableLength;
  t.diagnostic(`server send buffer at the close: ${buffered} bytes (hard cap ${CAPPED})`);
  assert.ok(buffered <= CAPPED + LARGE_FRAME_BYTES + 64, 'nothing queued after the send that passed the cap but the close frame');
  const { code, last } = await drainToClose(client, ids);
  assert.equal(code, 4009);
  assert.ok(last > 0 && last < COUNT, `cut after ${last}`);
});

test('a client that reads is never paused or closed by a burst of one tick, even one larger than the hard cap', async (t) => {
  // A page of 100 bulky messages (~120 KiB) goes out in one tick, corked
  // (src/gateway/tick-cork.ts): the corked bytes must not count as a slow consumer's backlog.
  const COUNT = 2000;
  const { setup, ids } = await serveCapped(t, 'bp-burst', 'rex', COUNT);
  const client = await setup.gw.connect('rex', { device: 'reader' });
  await expectWelcome(client, 1, COUNT);
  await expectMsgs(client, 1, COUNT, ids, 1, { ackEvery: 100 });
  assert.equal(client.ws.readyState, client.ws.OPEN, 'still open');
  assert.deepEqual(await closesByCode(setup.gw), {});
});

test('a slow consumer that never reads again is counted as closed 4009, not as the 1006 its socket ends with', async (t) => {
  const HARD_CAP = 64 * KiB;
  const setup = await serve(t, 'bp-count', {
    socketHighWaterBytes: String(HARD_CAP), socketHardCapBytes: String(HARD_CAP), pausedTimeoutMs: '60s',
  });
  await postMany(setup.gw.client, 'stuck', 300, 1, { data: large });
  const { client, sock } = await connectStalled(setup, 'stuck', 'never');
  await waitUntil('the send buffer passed the hard cap', async () => sock.writableLength > HARD_CAP);
  // The client never reads the close frame: the server cuts the socket after its grace
  // period, and the close is counted by the code the server decided.
  await waitUntil('the close is counted', async () => Object.keys(await closesByCode(setup.gw)).length > 0, 15_000, 100);
  assert.deepEqual(await closesByCode(setup.gw), { 4009: 1 });
  // Read again: the client sees its socket end (what a non-reading client usually sees).
  client.ws.resume();
  assert.equal((await client.waitClose(30_000)).code, 1006);
});
