/**
 * A `pong` is written behind every frame already written to the connection, never
 * ahead of them (docs/protocol.md, "Detecting a dead connection"): a client whose
 * downlink is slow, or that reads slowly, gets its `pong` only after what was queued
 * for it before its `ping` came — up to a window of messages. So "no `pong` within a
 * few seconds" is no sign of a dead connection while other frames arrive (a browser
 * tester's finding, F9: six self-inflicted reconnects on a 200 KB/s link); the docs
 * tell a client to take any frame as a sign of life.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { STALL_HIGH_WATER, connectStalled, framesSent, startStallingGateway } from './gateway-fixture.js';
import { postMany, seqOf } from './delivery-fixture.js';

test('a ping sent while the client does not read is answered behind every msg written before it, and delivery goes on in order after the pong', async (t) => {
  // A window large enough that the socket, not the window, stops delivery.
  const { gw, sockets } = await startStallingGateway(t, { deliveryWindow: '10000' });
  const COUNT = 3000;
  // 3,000 messages of ~4 KiB (12 MB): more than the kernel's socket buffers (several
  // MB on loopback) and the 64 KiB high-water mark take, so delivery pauses with some unsent.
  await postMany(gw.client, 'slow', COUNT, 1, { data: (i) => ({ i, pad: 'x'.repeat(4000) }) });
  const { client, sock } = await connectStalled({ gw, sockets }, 'slow', 'd');
  // The server's own buffer past the high-water mark: delivery is paused, nothing more is written until the client reads.
  await waitUntil('the server paused delivery', async () => sock.writableLength > STALL_HIGH_WATER, 10_000, 10);
  const written = await framesSent(gw, 'msg');
  assert.ok(written > 0 && written < COUNT, `msgs written before the ping: ${written}`);
  client.send({ t: 'ping' });
  // The ping reached the server (its uplink is not stalled) and was answered, behind the queue.
  await waitUntil('the pong written', async () => await framesSent(gw, 'pong') === 1, 10_000, 10);
  client.ws.resume();
  const msgs = await client.msgs(COUNT);
  const pongAt = client.frames.findIndex((f) => f.t === 'pong');
  const msgsBeforePong = client.frames.slice(0, pongAt).filter((f) => f.t === 'msg').length;
  assert.equal(client.frames[0]?.t, 'welcome');
  assert.equal(msgsBeforePong, written, 'the pong came right after the msgs written before the ping, not ahead of them');
  assert.deepEqual(msgs.map(seqOf), Array.from({ length: COUNT }, (_, i) => i + 1), 'the msgs in order, none skipped');
});
