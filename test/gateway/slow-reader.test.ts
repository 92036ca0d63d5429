/**
 * A client that reads its socket slowly but steadily (docs/protocol.md "Flow control":
 * catch-ups "go at the client's pace"; slowclient F4): delivery pauses above the
 * high-water mark and the queue takes longer than `PIXIU_PAUSED_TIMEOUT` to fall to
 * half of it, yet it keeps draining, so the connection is served to the end, never
 * closed 4009; once the client stops reading, it is closed 4009 within the paused
 * timeout and a quarter. Real sockets: the client reads its socket at a set rate
 * (pausing and resuming it on a timer) and acks every message as it comes. Scaled
 * down from the finding (30 s, 1 MiB high-water mark, 60 KB messages, 80 KB/s):
 * a 2 s paused timeout, a 64 KiB mark, 150 KB messages read at 3 MB/s, so that a
 * window of them (15 MB) far outlasts what loopback's kernel buffers take (~3 MB).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import type { RawData } from 'ws';
import { RedisServer } from '../harness/redis-server.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { waitUntil } from '../harness/checks.js';
import type { TestClient } from '../harness/ws-client.js';
import { serverSockets } from './gateway-fixture.js';
import { expectWelcome, postMany, seqOf, startDelivery } from './delivery-fixture.js';

const KiB = 1024;
const HIGH_WATER = 64 * KiB;
const PAUSED_MS = 2000;
/** The client's reading rate, bytes per second. */
const READ_RATE = 3_000_000;
/** Messages of ~150 KB: a window of 100 is ~15 MB, five times what the kernel holds. */
const big = (i: number): unknown => ({ i, pad: 'x'.repeat(150_000) });
/**
 * Messages of ~700 KB for the second half, once the client has stopped reading: the
 * window's worth of them (60 here, 42 MB) is more than the kernel can hold for one
 * loopback connection even at its largest (this VM's tcp_rmem max 32 MiB and tcp_wmem
 * max 4 MiB; the receive buffer grows towards it while the client reads steadily), so
 * the server's own queue stays over the high-water mark. 40 of 150 KB (6 MB) could all
 * fit once the buffer had grown: the queue drained, nothing paused, and the 4009 did
 * not come (a quiet clean-clone CI run, 2026-12-07).
 */
const huge = (i: number): unknown => ({ i, pad: 'x'.repeat(700_000) });
const HUGE_COUNT = 60;
const SLOW_LOG = 'slow consumer closed';

/**
 * Reads `client`'s socket at `bytesPerSec` (on average): every 10 ms it may read that
 * many bytes more, and its socket is paused once it has read what it may. Acks each
 * `msg` as it arrives. Returns a function that stops reading for good.
 */
function readSlowly(client: TestClient, bytesPerSec: number): () => void {
  const ws = client.ws;
  const socket = (ws as unknown as { _socket: Socket })._socket;
  let budget = 0;
  const read = (chunk: Buffer): void => {
    budget -= chunk.length;
    if (budget <= 0) ws.pause();
  };
  const ack = (data: RawData): void => {
    const f = JSON.parse(data.toString()) as { t: string; seq?: number };
    if (f.t === 'msg') client.ack(f.seq as number);
  };
  socket.on('data', read);
  ws.on('message', ack);
  const timer = setInterval(() => {
    budget = Math.min(budget + bytesPerSec / 100, bytesPerSec / 100);
    if (budget > 0 && ws.isPaused) ws.resume();
  }, 10);
  return () => {
    clearInterval(timer);
    socket.off('data', read);
    ws.off('message', ack);
    ws.pause();
  };
}

test('a client that reads slowly but steadily is served at its pace, never closed 4009, though its pause outlasts PIXIU_PAUSED_TIMEOUT; stopped, it is closed 4009', async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const { logger, lines } = capturingLogger();
  const { gw } = await startDelivery(t, 'slow-reader', {
    redisUrl: redis.url, storeCacheBytes: '0', maxMessageBytes: String(768 * KiB),
    socketHighWaterBytes: String(HIGH_WATER), socketHardCapBytes: String(256 * 1024 * KiB), pausedTimeoutMs: `${PAUSED_MS}ms`,
  }, logger);
  const sockets = serverSockets(gw);
  const COUNT = 100;
  const ids = await postMany(gw.client, 'sly', COUNT, 1, { data: big });

  const client = await gw.connect('sly', { device: 'phone' });
  const stop = readSlowly(client, READ_RATE);
  t.after(stop);
  const sock = sockets.get('phone');
  assert.ok(sock, "the server end of phone's socket");

  // How long the server's queue stays above half the high-water mark at a stretch:
  // the pause (which begins past the mark and ends below half of it) lasts as long.
  let longestAboveMs = 0;
  let aboveSince: number | undefined;
  const watch = setInterval(() => {
    const now = performance.now();
    if (sock.writableLength >= HIGH_WATER / 2) aboveSince ??= now;
    else aboveSince = undefined;
    if (aboveSince !== undefined) longestAboveMs = Math.max(longestAboveMs, now - aboveSince);
  }, 20);
  t.after(() => clearInterval(watch));

  const started = performance.now();
  await expectWelcome(client, 1, COUNT);
  const msgs = await client.msgs(COUNT, { timeoutMs: 30_000 });
  const tookMs = performance.now() - started;
  clearInterval(watch);
  t.diagnostic(`${COUNT} messages (${(COUNT * 0.15).toFixed(1)} MB) in ${(tookMs / 1000).toFixed(1)} s; the longest pause ${(longestAboveMs / 1000).toFixed(1)} s (paused timeout ${PAUSED_MS / 1000} s)`);
  assert.deepEqual(msgs.map(seqOf), ids.map((_, i) => i + 1), 'every message, in order');
  assert.deepEqual(msgs.map((f) => f.id), ids);
  assert.equal(lines.filter((l) => l.msg === SLOW_LOG).length, 0, 'no slow consumer close');
  assert.equal(client.ws.readyState, client.ws.OPEN, 'still open');
  // The test is one only if the client drained slower than the pause allows.
  assert.ok(longestAboveMs > PAUSED_MS * 1.25, `a pause lasted ${longestAboveMs.toFixed(0)} ms, longer than the paused timeout`);

  // Now the client stops reading: more is sent, the connection pauses, the queue no
  // longer drains, and it is closed 4009 within the paused timeout and a quarter.
  stop();
  let pausedAt: number | undefined;
  const seePause = setInterval(() => {
    if (sock.writableLength > HIGH_WATER) pausedAt ??= performance.now();
  }, 5);
  t.after(() => clearInterval(seePause));
  await postMany(gw.client, 'sly', HUGE_COUNT, COUNT + 1, { data: huge });
  await waitUntil('the slow consumer is closed', async () => lines.some((l) => l.msg === SLOW_LOG), PAUSED_MS * 3, 20);
  const closedAt = performance.now();
  clearInterval(seePause);
  assert.ok(pausedAt !== undefined, 'the connection was paused');
  const closedAfterMs = closedAt - pausedAt;
  const line = lines.find((l) => l.msg === SLOW_LOG) as LogLine;
  t.diagnostic(`stopped reading: closed ${closedAfterMs.toFixed(0)} ms after the pause was seen (${String(line.reason)})`);
  assert.equal(line.code, 4009);
  assert.equal(line.reason, 'slow consumer: paused too long');
  // The timeout and a quarter after the last drain, which the kernel's buffers filling
  // may put a little after the pause was first seen.
  assert.ok(closedAfterMs <= PAUSED_MS * 1.25 + 1500, `closed ${closedAfterMs.toFixed(0)} ms after the pause`);
});
