/**
 * The node's budget for its WebSockets' send buffers (`PIXIU_SOCKET_BUFFER_BUDGET_BYTES`,
 * src/gateway/buffer-budget.ts), with real clients that stop reading (`ws` pause: the
 * server's send buffer fills once the kernel's have): while several of them are sent
 * large messages, what the node holds for them stays within the budget and a little per
 * connection, though each one's own high-water mark is far above; a reading client of
 * another user gets every message live meanwhile; and once the others read again they
 * get every message, in order, once. Live broadcasts, which a pause does not hold back,
 * close such a client 4009 at the budget instead (it reconnects with its `last_bseq`
 * and catches up).
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { metricSample, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { BUDGET_FLOOR_BYTES, BUDGET_REACHED_LOG, LIVE_REFUSED_REASON } from '../../src/gateway/buffer-budget.js';
import { closesByCode, connectStalled, heldBy, serverSockets, stall, type StalledClient } from './gateway-fixture.js';
import { expectFrame, expectMsgs, expectWelcome, startDelivery } from './delivery-fixture.js';

const KiB = 1024;
const MiB = 1024 * KiB;

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

test('clients that stop reading hold no more than the node\'s budget and a little each; a reading client gets every message live; the others get all once they read', async (t) => {
  const BUDGET = 2 * MiB;
  const HIGH_WATER = 4 * MiB;
  const STALLED = 5;
  // Enough for each stalled socket to fill the kernel's buffers (a few MiB on loopback)
  // and then its own high-water mark, were the budget not there.
  const COUNT = 150;
  const data = (i: number): unknown => ({ i, pad: 'x'.repeat(60_000) });
  /** Longest `msg` frame of {@link data}, bytes, with the WebSocket header. */
  const FRAME = 61 * KiB;
  const logged = capturingLogger();
  const { gw } = await startDelivery(t, 'budget', {
    redisUrl: redis.url, storeCacheBytes: '0', deliveryWindow: '1000', ackTimeoutMs: '60s', pausedTimeoutMs: '60s',
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(64 * MiB), socketBufferBudgetBytes: String(BUDGET),
  }, logged.logger);
  const sockets = serverSockets(gw);

  const reader = await gw.connect('ola', { device: 'phone' });
  await expectWelcome(reader, 1, 0);
  const stalled: StalledClient[] = [];
  for (let i = 0; i < STALLED; i++) {
    const client = await gw.connect(`s${i}`, { device: `stalled-${i}` });
    await expectWelcome(client, 1, 0);
    stalled.push(stall(client, sockets, `stalled-${i}`));
  }
  const held = (): number => heldBy(stalled);

  // Each message to every stalled user and to the reader, one at a time: the reader
  // must get each live, whatever the stalled ones hold.
  const to = [...stalled.map((_, i) => `s${i}`), 'ola'];
  const ids: string[] = [];
  let most = 0;
  let slowest = 0;
  for (let i = 0; i < COUNT; i++) {
    const posted = performance.now();
    const answer = await gw.client.post('/v1/messages', { to, type: 'test.big', data: data(i) });
    assert.equal(answer.status, 201, answer.text.slice(0, 300));
    const id = (answer.body as { id: string }).id;
    ids.push(id);
    const got = await expectFrame(reader, 'msg', 5000);
    assert.deepEqual([got.seq, got.id], [i + 1, id], 'the reader gets each message live, in order');
    reader.ack(i + 1);
    slowest = Math.max(slowest, performance.now() - posted);
    most = Math.max(most, held());
  }
  // The last writes settle (a frame written in the turn after the answer): a fixed wait,
  // as `most` is a maximum that one more sample can only raise (200 ms: many turns).
  await new Promise((resolve) => setTimeout(resolve, 200));
  most = Math.max(most, held());
  const metrics = (await gw.client.get('/metrics')).text;
  const gauge = metricSample(metrics, 'pixiu_ws_buffered_bytes') ?? -1;
  const pauses = metricSample(metrics, 'pixiu_ws_budget_pauses_total') ?? -1;
  t.diagnostic(`most held for the ${STALLED} stalled sockets: ${(most / MiB).toFixed(2)} MiB (budget ${BUDGET / MiB} MiB, high-water ${HIGH_WATER / MiB} MiB each); gauge ${(gauge / MiB).toFixed(2)} MiB; budget pauses ${pauses}; slowest live delivery ${slowest.toFixed(0)} ms`);

  // Without the budget each would hold up to its high-water mark (4 MiB, 20 in all).
  const bound = BUDGET + STALLED * (BUDGET_FLOOR_BYTES + 2 * FRAME);
  assert.ok(most <= bound, `held ${most} bytes, over the budget ${BUDGET} and a floor and two frames per connection (${bound})`);
  assert.ok(gauge >= 0 && gauge <= bound, `pixiu_ws_buffered_bytes ${gauge}`);
  assert.ok(pauses >= 1, 'pauses caused by the budget are counted');
  assert.ok(logged.lines.some((l) => l.msg === BUDGET_REACHED_LOG && l.level === 40), 'the budget reached is logged at warn');
  assert.ok(stalled.every((s) => s.client.ws.readyState === s.client.ws.OPEN), 'no stalled client was closed');

  // Read again: every message, in order, once (none redelivered within this test's ack timeout).
  for (const s of stalled) s.client.ws.resume();
  await Promise.all(stalled.map((s) => expectMsgs(s.client, 1, COUNT, ids, 1, { ackEvery: 10, timeoutMs: 10_000 })));
  for (const s of stalled) assert.equal(await s.client.receivesWithin(100), false, 'nothing after the last');
  // Closed connections leave the sum.
  for (const s of [...stalled.map((x) => x.client), reader]) s.ws.close();
  await waitUntil('the closed connections left the sum', async () =>
    metricSample((await gw.client.get('/metrics')).text, 'pixiu_ws_buffered_bytes') === 0);
});

/** What {@link backlogOf} leaves: the stalled devices, their server sockets' queues, the MsgIDs posted. */
interface Backlog {
  gw: Awaited<ReturnType<typeof startDelivery>>['gw'];
  stalled: StalledClient[];
  ids: string[];
  /** Bytes the stalled devices' server sockets hold now. */
  held: () => number;
}

const BACKLOG = 150;
/** Longest `msg` frame of the backlog's messages, bytes, with the WebSocket header. */
const BACKLOG_FRAME = 61 * KiB;

/**
 * Posts {@link BACKLOG} messages of 60 KB to `stalledCount` users, then connects a device
 * of each that does not read (its socket paused).
 */
async function backlogOf(t: TestContext, name: string, settings: Record<string, string>, stalledCount: number): Promise<Backlog> {
  const { gw } = await startDelivery(t, name, { redisUrl: redis.url, storeCacheBytes: '0', ackTimeoutMs: '60s', pausedTimeoutMs: '60s', ...settings });
  const on = { gw, sockets: serverSockets(gw) };
  const users = Array.from({ length: stalledCount }, (_, i) => `b${i}`);
  const ids: string[] = [];
  for (let i = 0; i < BACKLOG; i++) {
    const answer = await gw.client.post('/v1/messages', { to: users, type: 'test.big', data: { i, pad: 'y'.repeat(60_000) } });
    assert.equal(answer.status, 201, answer.text.slice(0, 300));
    ids.push((answer.body as { id: string }).id);
  }
  const stalled: StalledClient[] = [];
  for (const user of users) stalled.push(await connectStalled(on, user, `backlog-${user}`));
  return { gw, stalled, ids, held: () => heldBy(stalled) };
}

/** The most the backlog's sockets hold, and the gauge `pixiu_ws_buffered_bytes` shows, over a second, bytes. */
async function mostHeld(b: Backlog): Promise<{ most: number; gauge: number }> {
  let most = 0;
  let gauge = 0;
  for (let i = 0; i < 10; i++) {
    // Samples over a window, not a wait for an event: the bound must hold all along.
    await new Promise((resolve) => setTimeout(resolve, 100));
    most = Math.max(most, b.held());
    gauge = Math.max(gauge, metricSample((await b.gw.client.get('/metrics')).text, 'pixiu_ws_buffered_bytes') ?? 0);
  }
  return { most, gauge };
}

/** The stalled devices read again: each gets every message of the backlog, in order, once; then they close. */
async function readAll(b: Backlog, stalled = b.stalled): Promise<void> {
  for (const s of stalled) s.client.ws.resume();
  await Promise.all(stalled.map(async (s) => {
    await expectWelcome(s.client, 1, BACKLOG);
    await expectMsgs(s.client, 1, BACKLOG, b.ids, 1, { ackEvery: 10, timeoutMs: 10_000 });
    assert.equal(await s.client.receivesWithin(100), false, 'nothing after the last');
  }));
  for (const s of stalled) s.client.ws.close();
  await waitUntil('every connection left the sum', async () =>
    metricSample((await b.gw.client.get('/metrics')).text, 'pixiu_ws_buffered_bytes') === 0);
}

test('devices that connect to a backlog and do not read hold no more than the budget, the page that crossed it and a floor and a message each: a page stops at its byte allowance; one cut off leaves the sum; the others get it all once they read', async (t) => {
  const BUDGET = 2 * MiB;
  const STALLED = 4;
  /** The default high-water mark (PIXIU_SOCKET_HIGH_WATER_BYTES): a page's allowance while the node is under its budget. */
  const HIGH_WATER = MiB;
  const b = await backlogOf(t, 'budget-backlog', { socketBufferBudgetBytes: String(BUDGET) }, STALLED);
  await waitUntil('the budget is reached', async () =>
    (metricSample((await b.gw.client.get('/metrics')).text, 'pixiu_ws_budget_pauses_total') ?? 0) >= 1 || b.held() >= BUDGET);
  // A page is cut once its frames reach the connection's allowance (its high-water mark
  // less what it holds; the budget's floor once the node is at its budget), and the rest
  // follows only as it drains. Without the cut, each was written a whole page (100
  // messages, ~6 MB, of which the kernel took ~4): 8 MiB held in all.
  const { most, gauge } = await mostHeld(b);
  t.diagnostic(`${STALLED} devices connecting to ${BACKLOG} × 60 KB and not reading hold ${(most / MiB).toFixed(2)} MiB in the node, gauge ${(gauge / MiB).toFixed(2)} MiB (budget ${BUDGET / MiB} MiB)`);
  const bound = BUDGET + HIGH_WATER + STALLED * (BUDGET_FLOOR_BYTES + BACKLOG_FRAME);
  assert.ok(most <= bound, `held ${most} bytes, over the budget, a high-water mark and a floor and a message per connection (${bound})`);
  assert.ok(gauge <= bound, `pixiu_ws_buffered_bytes ${gauge}, over ${bound}`);

  // One vanishes while its queue is full (its socket cut, not closed): its bytes leave the sum.
  const [gone, ...rest] = b.stalled as [StalledClient, ...StalledClient[]];
  gone.client.ws.terminate();
  await readAll(b, rest);
});

test('with no budget, devices that connect to a backlog and do not read hold no more than their high-water mark and a message each (a page stops at it), and get it all once they read', async (t) => {
  const HIGH_WATER = 256 * KiB;
  const STALLED = 4;
  const b = await backlogOf(t, 'hwm-backlog', { socketBufferBudgetBytes: '0', socketHighWaterBytes: String(HIGH_WATER) }, STALLED);
  await waitUntil('each stalled socket holds past its high-water mark', async () => b.stalled.every((s) => s.sock.writableLength > HIGH_WATER / 2));
  // Without the cut: a page of 100 messages each (~6 MB), the kernel taking ~4 of it.
  const { most, gauge } = await mostHeld(b);
  t.diagnostic(`${STALLED} devices, high-water ${HIGH_WATER / KiB} KiB, no budget: hold ${(most / MiB).toFixed(2)} MiB, gauge ${(gauge / MiB).toFixed(2)} MiB`);
  const bound = STALLED * (HIGH_WATER + BACKLOG_FRAME);
  assert.ok(most <= bound, `held ${most} bytes, over a high-water mark and a message per connection (${bound})`);
  assert.ok(gauge <= bound, `pixiu_ws_buffered_bytes ${gauge}, over ${bound}`);
  await readAll(b);
});

test('live broadcasts are held to the budget too: devices that stop reading while 60 KB broadcasts go out are closed 4009 once held back at it (not at their hard cap), the reader gets each live, and the others, reconnecting with their last_bseq, get every one they missed', async (t) => {
  const BUDGET = MiB;
  const STALLED = 4;
  // Enough for each stalled socket to fill the kernel's buffers (a few MiB on loopback)
  // and then hold several MiB in the node, were live broadcasts not held to the budget.
  const COUNT = 150;
  /** Longest `bcast` frame of these broadcasts, bytes, with the WebSocket header. */
  const FRAME = 61 * KiB;
  const logged = capturingLogger();
  const { gw } = await startDelivery(t, 'budget-bcast', {
    redisUrl: redis.url, pausedTimeoutMs: '60s', socketHardCapBytes: String(64 * MiB), socketBufferBudgetBytes: String(BUDGET),
  }, logged.logger);
  const sockets = serverSockets(gw);
  const { client: reader } = await gw.connectWelcomed('ola', { device: 'reader' });
  const stalled: (StalledClient & { bseq: string })[] = [];
  for (let i = 0; i < STALLED; i++) {
    const { client, welcome } = await gw.connectWelcomed(`c${i}`, { device: `stalled-${i}` });
    stalled.push({ ...stall(client, sockets, `stalled-${i}`), bseq: welcome.bseq as string });
  }
  const held = (): number => heldBy(stalled);

  // One broadcast at a time, each read live by the reader before the next.
  const posted: string[] = [];
  let most = 0;
  let gauge = 0;
  for (let i = 0; i < COUNT; i++) {
    const answer = await gw.client.post('/v1/broadcast', { type: 'test.big', data: { i, pad: 'z'.repeat(60_000) } });
    assert.equal(answer.status, 201, answer.text.slice(0, 300));
    const bcast = await expectFrame(reader, 'bcast', 5000);
    assert.equal((bcast.data as { i: number }).i, i, 'the reader gets each broadcast live, in order');
    posted.push(bcast.bseq as string);
    most = Math.max(most, held());
    if (i % 10 === 9) gauge = Math.max(gauge, metricSample((await gw.client.get('/metrics')).text, 'pixiu_ws_buffered_bytes') ?? 0);
  }
  // As above: one more sample of a maximum after the last writes could go out (200 ms).
  await new Promise((resolve) => setTimeout(resolve, 200));
  most = Math.max(most, held());
  const metrics = (await gw.client.get('/metrics')).text;
  gauge = Math.max(gauge, metricSample(metrics, 'pixiu_ws_buffered_bytes') ?? 0);
  const refused = metricSample(metrics, 'pixiu_ws_budget_closes_total') ?? -1;
  t.diagnostic(`${STALLED} devices not reading ${COUNT} × 60 KB broadcasts: most held ${(most / MiB).toFixed(2)} MiB, gauge ${(gauge / MiB).toFixed(2)} MiB (budget ${BUDGET / MiB} MiB); closed by the budget ${refused}`);
  // Before, each was written every broadcast up to its hard cap (64 MiB here): ~20 MB in all.
  const bound = BUDGET + STALLED * (BUDGET_FLOOR_BYTES + 2 * FRAME);
  assert.ok(most <= bound, `held ${most} bytes, over the budget and a floor and two frames per connection (${bound})`);
  assert.ok(gauge <= bound, `pixiu_ws_buffered_bytes ${gauge}, over ${bound}`);
  assert.equal(refused, STALLED, 'each stalled connection closed by the budget, once');
  const closeLines = logged.lines.filter((l) => l.reason === LIVE_REFUSED_REASON);
  assert.equal(closeLines.length, STALLED, 'each close logged with its reason, as every 4009');

  // They read again: what reached them before the close, then a reconnect with the
  // last bseq each got, which catches up every broadcast it missed, in order, once.
  await Promise.all(stalled.map(async (s, k) => {
    s.client.ws.resume();
    await s.client.closed;
    const before = s.client.frames.filter((f) => f.t === 'bcast').map((f) => f.bseq as string);
    assert.deepEqual(before, posted.slice(0, before.length), `stalled-${k}: a prefix of the broadcasts, in order`);
    const lastBseq = before.at(-1) ?? s.bseq;
    const again = await gw.connect(`c${k}`, { device: `stalled-${k}`, params: { last_bseq: lastBseq } });
    await expectFrame(again, 'welcome');
    const rest: string[] = [];
    while (rest.length < COUNT - before.length) {
      const f = await again.next(10_000);
      assert.equal(f.t, 'bcast', `stalled-${k}: only broadcasts after the welcome, no gap: ${JSON.stringify(f).slice(0, 200)}`);
      rest.push(f.bseq as string);
    }
    assert.deepEqual([...before, ...rest], posted, `stalled-${k}: every broadcast, in order, once`);
    assert.equal(await again.receivesWithin(100), false, 'nothing after the last');
  }));
  // Counted when the socket is gone (the close frame waited behind what the client had not read).
  assert.equal((await closesByCode(gw, 'server'))['4009'], STALLED, 'counted as the server\'s 4009s');
});
