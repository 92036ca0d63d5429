/**
 * Backpressure (DESIGN.md §5) from broadcasts: a connection paused because broadcasts
 * filled its send buffer resumes when the buffer drains, as one paused by inbox
 * messages does — written out, the broadcasts themselves tell it so. Until then its
 * inbox delivery waits; after, a message posted to it arrives, with no frame of the
 * client's own needed to restart it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { STALL_HIGH_WATER, startStallingGateway } from './gateway-fixture.js';

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
    const pad = 'x'.repeat(8000);
    let posted = 0;
    while (sock.writableLength <= STALL_HIGH_WATER) {
      const answer = await gw.client.post('/v1/broadcast', { type: 'test.burst', data: { n: posted, pad } });
      assert.equal(answer.status, 201, answer.text);
      posted += 1;
      assert.ok(posted < 5000, `${posted} broadcasts and ${sock.writableLength} bytes buffered`);
    }
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
