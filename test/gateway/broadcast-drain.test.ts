/**
 * Backpressure (DESIGN.md §5) from broadcasts: a connection paused because broadcasts
 * filled its send buffer resumes when the buffer drains, as one paused by inbox
 * messages does — written out, the broadcasts themselves tell it so. Until then its
 * inbox delivery waits; after, a message posted to it arrives, with no frame of the
 * client's own needed to restart it. And a client that stops reading while live
 * broadcasts go on is closed 4009 once its queue passes the hard cap, as for messages.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { STALL_HIGH_WATER, startStallingGateway, type GatewayFixture } from './gateway-fixture.js';

/**
 * Posts broadcasts of `pad` to every client, one at a time, while `more` (given how
 * many were posted) says so (at most 5,000).
 * @returns how many were posted
 */
async function broadcastWhile(gw: GatewayFixture, pad: string, more: (posted: number) => boolean): Promise<number> {
  let posted = 0;
  while (more(posted)) {
    const answer = await gw.client.post('/v1/broadcast', { type: 'test.burst', data: { n: posted, pad } });
    assert.equal(answer.status, 201, answer.text);
    posted += 1;
    assert.ok(posted < 5000, `${posted} broadcasts posted`);
  }
  return posted;
}

test('a connection paused by a burst of broadcasts resumes at the drain: an inbox message posted after it arrives', { timeout: 60_000 }, async () => {
  const cleanup = cleanupList();
  try {
    // No close for the buffer's size: the burst may overshoot the high-water mark.
    const { gw, sockets } = await startStallingGateway(cleanup, { socketHardCapBytes: String(64 * 1024 * 1024) });
    const { client } = await gw.connectWelcomed('bcreader', { device: 'tab' });
    client.ws.pause();
    const sock = sockets.get('tab');
    assert.ok(sock, 'the server end of the socket');
    // Broadcasts until the server's own buffer passes the high-water mark (the
    // kernel's buffers fill first): the connection is paused.
    const posted = await broadcastWhile(gw, 'x'.repeat(8000), () => sock.writableLength <= STALL_HIGH_WATER);
    // The client reads everything again; then a message is posted to it.
    client.ws.resume();
    await waitUntil('every broadcast arrived', async () => client.frames.filter((f) => f.t === 'bcast').length === posted, 30_000);
    const sent = await gw.client.post('/v1/messages', { to: 'bcreader', type: 'test.after', data: { after: true } });
    assert.equal(sent.status, 201, sent.text);
    const msg = await client.nextOf('msg', 10_000);
    assert.deepEqual(msg.data, { after: true });
  } finally {
    await cleanup.run();
  }
});

test('a client that stops reading while live broadcasts are sent is closed 4009 once its queue passes the hard cap, and nothing more is queued', { timeout: 60_000 }, async () => {
  const cleanup = cleanupList();
  try {
    const HARD_CAP = 256 * 1024;
    const { gw, sockets } = await startStallingGateway(cleanup, { socketHardCapBytes: String(HARD_CAP) });
    const { client } = await gw.connectWelcomed('bcstuck', { device: 'tab' });
    client.ws.pause();
    const sock = sockets.get('tab');
    assert.ok(sock, 'the server end of the socket');
    const pad = 'x'.repeat(8000);
    await broadcastWhile(gw, pad, () => sock.writableLength <= HARD_CAP);
    const atClose = sock.writableLength;
    await broadcastWhile(gw, pad, (n) => n < 10);
    // (The kernel may still take some of it: the queue can only shrink.)
    assert.ok(sock.writableLength <= atClose, `nothing queued after the close: ${sock.writableLength} bytes, ${atClose} at the close`);
    client.ws.resume();
    assert.equal((await client.waitClose(30_000)).code, 4009);
  } finally {
    await cleanup.run();
  }
});
