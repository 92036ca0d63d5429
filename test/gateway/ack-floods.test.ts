/**
 * Acks that move no cursor and unsolicited WebSocket pongs are held to the frame
 * budgets of docs/protocol.md ("Client → server", src/gateway/frame-limits.ts): one
 * user flooding `{"t":"ack","seq":0}` or empty pong control frames over its
 * connections held every producer's POSTs for seconds and was never closed (a
 * hostile-input newcomer's finding, high). A client that acks what it is sent, and
 * answers the server's pings, is never closed for it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONTROL_FRAME_WINDOW_MS, MAX_CONTROL_FRAMES, abuseDropBytes, idleAckAllowance } from '../../src/gateway/frame-limits.js';
import { CLOSE_GRACE_MS } from '../../src/gateway/server-close.js';
import { waitUntil } from '../harness/checks.js';
import type { RedisServer } from '../harness/redis-server.js';
import { fileRedis } from '../harness/file-redis.js';
import type { CleanupList } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, closesByCode, expectPong, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { postMany, startDelivery } from './delivery-fixture.js';
import { PONG_FRAME, clientFrame, rawUpgrade } from './raw-upgrade.js';

let redis: RedisServer;
let gw: GatewayFixture;
/** A second service whose server pings come every 200 ms, for the pongs answering them. */
let fastPings: GatewayFixture;
let cleanup: CleanupList;
const IDLE_ACK = clientFrame('{"t":"ack","seq":0}');
const PING = clientFrame('{"t":"ping"}');

fileRedis(async (file) => {
  ({ redis, cleanup } = file);
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'acks:' });
  fastPings = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'pongs:', heartbeatMs: '200' });
});

/** How many `pong` frames are among `frames`. */
const pongs = (frames: readonly { t: unknown }[]): number => frames.filter((f) => f.t === 'pong').length;

test('acks that move no cursor, those sent before welcome included, close the connection 4003 one past their allowance (700 by default, and one per msg sent); another user\'s delivery goes on', async () => {
  const budget = idleAckAllowance(gw.config.deliveryWindow, gw.config.redeliveryBackoffMs.length);
  assert.equal(budget, 700, 'the documented budget with the default window and redelivery rounds');
  const before = (await closesByCode(gw, 'server'))['4003'] ?? 0;
  await gw.post('acker', 3);
  // 63 acks and a ping with the upgrade request: held until welcome, then applied (at or below the cursor).
  const early = 63;
  const conn = rawUpgrade(gw.url, await testToken(JWT_KEY, 'acker'), [...Array.from({ length: early }, () => IDLE_ACK), PING]);
  try {
    await conn.until((got) => pongs(got) === 1);
    assert.equal(conn.frames[0]?.t, 'welcome');
    // Up to the budget, in one write: still open (the ping after them is answered). Each
    // of the 3 msgs sent allows one more (a client may ack a message twice).
    conn.socket.write(Buffer.concat([...Array.from({ length: budget + 3 - early }, () => IDLE_ACK), PING]));
    await conn.until((got) => pongs(got) === 2);
    assert.equal(conn.closeCode(), undefined);
    // Meanwhile another user is delivered to.
    const { client: other } = await gw.connectWelcomed('bystander');
    await gw.post('bystander', 1);
    await other.msgs(1, { ack: true });
    // One more in the same 30 s window: closed 4003, counted as the server's.
    conn.socket.write(IDLE_ACK);
    await conn.until(() => false);
    assert.equal(conn.closeCode(), 4003);
    assert.equal(conn.frames.filter((f) => f.t === 'error').length, 0, 'acks that move nothing are not answered');
    await expectPong(other);
  } finally {
    conn.socket.destroy();
  }
  await waitUntil('the close counted by="server"', async () => ((await closesByCode(gw, 'server'))['4003'] ?? 0) === before + 1);
});

test('a flood of acks that move nothing, written as fast as the socket takes them, is closed 4003 while another user is delivered to', async () => {
  const { client: other } = await gw.connectWelcomed('onlooker');
  const conn = rawUpgrade(gw.url, await testToken(JWT_KEY, 'flooder'));
  try {
    await conn.until((got) => got.length > 0);
    const closed = conn.until(() => false).catch(() => undefined);
    const burst = Buffer.concat(Array.from({ length: 5000 }, () => IDLE_ACK));
    const flood = (async () => {
      // 100 bursts, 500,000 acks: far past the budget of 400.
      for (let n = 0; n < 100 && conn.closeCode() === undefined && !conn.socket.destroyed; n++) {
        if (!conn.socket.write(burst)) await Promise.race([new Promise((resolve) => conn.socket.once('drain', resolve)), closed]);
      }
    })();
    await gw.post('onlooker', 1);
    await other.msgs(1, { ack: true });
    await flood;
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
    assert.equal(conn.closeCode(), 4003);
  } finally {
    conn.socket.destroy();
  }
});

test('a client that floods on after its 4003 close is cut once past 64 × PIXIU_MAX_CLIENT_FRAME_BYTES of dropped bytes, not read for the whole close grace', async () => {
  const cap = abuseDropBytes(gw.config.maxClientFrameBytes);
  assert.equal(cap, 256 * 1024, 'the documented cap with the default frame size');
  const conn = rawUpgrade(gw.url, await testToken(JWT_KEY, 'persister'));
  try {
    await conn.until((got) => got.length > 0);
    // One pong past the window's 300: closed 4003.
    conn.socket.write(Buffer.concat(Array.from({ length: MAX_CONTROL_FRAMES + 1 }, () => PONG_FRAME)));
    await conn.until(() => false);
    assert.equal(conn.closeCode(), 4003);
    const closedAt = performance.now();
    const gone = new Promise<void>((resolve) => {
      conn.socket.once('close', () => resolve());
    });
    let cut = false;
    void gone.then(() => { cut = true; });
    // Valid acks, written on as fast as the socket takes them: only the cap ends this early.
    const burst = Buffer.concat(Array.from({ length: 2000 }, () => IDLE_ACK));
    let written = 0;
    while (!cut && !conn.socket.destroyed && performance.now() - closedAt < 2 * CLOSE_GRACE_MS) {
      written += burst.length;
      if (!conn.socket.write(burst)) await Promise.race([new Promise((resolve) => conn.socket.once('drain', resolve)), gone]);
    }
    conn.socket.destroy();
    await gone;
    const tookMs = performance.now() - closedAt;
    assert.ok(written > cap, `${written} bytes written, over the cap of ${cap}`);
    assert.ok(tookMs < CLOSE_GRACE_MS / 2, `cut after ${Math.round(tookMs)} ms, before the ${CLOSE_GRACE_MS} ms grace`);
  } finally {
    conn.socket.destroy();
  }
});

test(`unsolicited WebSocket pongs count as frames other than ack: one past the ${MAX_CONTROL_FRAMES} of the window closes 4003`, async () => {
  const conn = rawUpgrade(gw.url, await testToken(JWT_KEY, 'ponger'));
  try {
    await conn.until((got) => got.length > 0);
    // 299 pongs and a ping: the 300 of the window (the server pings every 25 s: none is owed yet).
    conn.socket.write(Buffer.concat([...Array.from({ length: MAX_CONTROL_FRAMES - 1 }, () => PONG_FRAME), PING]));
    await conn.until((got) => pongs(got) === 1);
    assert.equal(conn.closeCode(), undefined);
    conn.socket.write(PONG_FRAME);
    await conn.until(() => false);
    assert.equal(conn.closeCode(), 4003);
  } finally {
    conn.socket.destroy();
  }
});

test('pongs answering the server\'s pings are free: a client at the limit of its window that answers every ping stays open', async () => {
  const { client } = await fastPings.connectWelcomed('answerer');
  let pings = 0;
  client.ws.on('ping', () => { pings += 1; });
  // 299 unsolicited pongs and a ping: the whole window (each pong a ping is owed for is free instead).
  for (let i = 0; i < MAX_CONTROL_FRAMES - 1; i++) client.ws.pong();
  await expectPong(client);
  const from = pings;
  const startedAt = Date.now();
  // `ws` answers each server ping with a pong: 5 of them (about a second), all free.
  await waitUntil('5 more server pings', async () => pings >= from + 5, 10_000, 10);
  await fastPings.post('answerer', 1);
  await client.msgs(1, { ack: true });
  assert.equal(client.ws.readyState, client.ws.OPEN);
  assert.ok(Date.now() - startedAt < CONTROL_FRAME_WINDOW_MS, 'all in one window');
});

test('a client that acks each message of a 1,000-message backlog and re-acks the last seq a few times is never closed', async () => {
  await postMany(gw.client, 'reader', 1000);
  const { client } = await gw.connectWelcomed('reader', { device: 'phone' });
  const got = await client.msgs(1000, { ack: true });
  assert.deepEqual(got.map((f) => f.seq), Array.from({ length: 1000 }, (_, i) => i + 1));
  for (let i = 0; i < 5; i++) client.ack(1000);
  await expectPong(client);
  assert.equal(client.frames.filter((f) => f.t === 'error').length, 0);
});

test('a client with a window of 200 that acks late, after every redelivery round, acks each of the 800 copies and is not closed', async () => {
  const WINDOW = 200;
  // The rounds come quickly; the wait after the last (before 4008) leaves time to ack.
  const { gw: late } = await startDelivery(cleanup, 'late', {
    redisUrl: redis.url, deliveryWindow: String(WINDOW), ackTimeoutMs: '200', redeliveryBackoffMs: '100,100,10000',
  });
  const budget = idleAckAllowance(WINDOW, 3);
  // The first 200 acks move the cursor; the 600 acks of the copies move nothing: over a window plus 300.
  assert.ok(3 * WINDOW > WINDOW + MAX_CONTROL_FRAMES && 3 * WINDOW <= budget, `the copies' acks fit the allowance of ${budget}`);
  await postMany(late.client, 'slowpoke', WINDOW);
  const { client } = await late.connectWelcomed('slowpoke', { device: 'phone' });
  const msgFrames = (): { seq: number; redelivered?: boolean }[] =>
    client.frames.filter((f) => f.t === 'msg') as unknown as { seq: number; redelivered?: boolean }[];
  await waitUntil('the window sent and resent three times', async () => msgFrames().length === 4 * WINDOW, 20_000, 10);
  assert.equal(msgFrames().filter((f) => f.redelivered === true).length, 3 * WINDOW);
  for (const f of msgFrames()) client.ack(f.seq);
  await expectPong(client);
  assert.equal(client.ws.readyState, client.ws.OPEN);
  assert.equal(client.frames.filter((f) => f.t === 'error').length, 0);
  assert.equal(await client.receivesWithin(300), false, 'nothing resent, no close');
});

test('a client that acks each message of a 1,000-message backlog twice, on receipt and once handled, is never closed', async () => {
  await postMany(gw.client, 'twice', 1000);
  const { client } = await gw.connectWelcomed('twice', { device: 'phone' });
  const seqs: number[] = [];
  while (seqs.length < 1000) {
    const f = await client.nextOf('msg');
    client.ack(f.seq as number);
    client.ack(f.seq as number);
    seqs.push(f.seq as number);
  }
  assert.deepEqual(seqs, Array.from({ length: 1000 }, (_, i) => i + 1));
  await expectPong(client);
  assert.equal(client.ws.readyState, client.ws.OPEN);
});

test('a client that acks 1,500 messages on receipt and acks them all again once handled, far behind, is never closed', async () => {
  await postMany(gw.client, 'behind', 1500);
  const { client } = await gw.connectWelcomed('behind', { device: 'phone' });
  const got = await client.msgs(1500, { ack: true });
  // Handled long after: 1,500 second acks, more than the allowance (700) and the 700 it could once hold earned.
  for (const f of got) client.ack(f.seq as number);
  await expectPong(client);
  assert.equal(client.ws.readyState, client.ws.OPEN);
});
