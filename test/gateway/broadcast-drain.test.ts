/**
 * Backpressure (DESIGN.md §5) from broadcasts: a connection paused because broadcasts
 * filled its send buffer resumes when the buffer drains, as one paused by inbox
 * messages does — written out, the broadcasts themselves tell it so. Until then its
 * inbox delivery waits; after, a message posted to it arrives, with no frame of the
 * client's own needed to restart it. And a client that stops reading while live
 * broadcasts go on is closed 4009 once its queue passes the hard cap, as for messages,
 * and so is one that pings without reading once the pongs take it past the cap.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
import { STALL_HIGH_WATER, framesSent, stall, startStallingGateway, type GatewayFixture, type StalledClient } from './gateway-fixture.js';

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

/**
 * The `pad` of a broadcast that fills buffers: 60,000 characters, near the 64 KiB a
 * message may hold (PIXIU_MAX_MESSAGE_BYTES). The kernel's buffers on loopback take some
 * 4 MiB from a client that does not read before the server's own buffer grows: about 70
 * of these, where broadcasts of 8 KB took some 500 posts (each a request, a stream entry
 * and a fan-out) for the same bytes.
 */
const BIG_PAD = 'x'.repeat(60_000);

/**
 * A stalling gateway (gateway-fixture.ts: 64 KiB high-water mark) with this hard cap,
 * and `user`'s device `tab` connected, welcomed, and no longer read by its client.
 * @returns the gateway, the client and the server's end of its socket
 */
async function stalledTab(cleanup: CleanupContext, user: string, hardCapBytes: number): Promise<StalledClient & { gw: GatewayFixture }> {
  const { gw, sockets } = await startStallingGateway(cleanup, { socketHardCapBytes: String(hardCapBytes) });
  const { client } = await gw.connectWelcomed(user, { device: 'tab' });
  return { gw, ...stall(client, sockets, 'tab') };
}

test('a connection paused by a burst of broadcasts resumes at the drain: an inbox message posted after it arrives', { timeout: 60_000 }, async () => {
  const cleanup = cleanupList();
  try {
    // No close for the buffer's size: the burst may overshoot the high-water mark.
    const { gw, client, sock } = await stalledTab(cleanup, 'bcreader', 64 * 1024 * 1024);
    // Broadcasts until the server's own buffer passes the high-water mark (the
    // kernel's buffers fill first): the connection is paused.
    const posted = await broadcastWhile(gw, BIG_PAD, () => sock.writableLength <= STALL_HIGH_WATER);
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
    const { gw, client, sock } = await stalledTab(cleanup, 'bcstuck', HARD_CAP);
    await broadcastWhile(gw, BIG_PAD, () => sock.writableLength <= HARD_CAP);
    const atClose = sock.writableLength;
    await broadcastWhile(gw, BIG_PAD, (n) => n < 10);
    // (The kernel may still take some of it: the queue can only shrink.)
    assert.ok(sock.writableLength <= atClose, `nothing queued after the close: ${sock.writableLength} bytes, ${atClose} at the close`);
    client.ws.resume();
    assert.equal((await client.waitClose(30_000)).code, 4009);
  } finally {
    await cleanup.run();
  }
});

test('pongs are held to the send buffer\'s hard cap: a client paused by broadcasts that pings without reading is closed 4009', { timeout: 60_000 }, async () => {
  const cleanup = cleanupList();
  try {
    // Broadcasts of ~4 KiB leave the paused queue a little past 64 KiB (the fan-out may
    // lag a few posts): under this cap, which 290 pongs (127 bytes each, 36 KiB) then
    // pass, within the 300 frames other than ack.
    const HARD_CAP = 90 * 1024;
    const { gw, client, sock } = await stalledTab(cleanup, 'pingstuck', HARD_CAP);
    // The kernel's buffers are filled first with broadcasts of 16 KB (a quarter of the
    // posts for the same bytes), until the server's own buffer holds any: even with the
    // fan-out a few posts behind, that leaves it well under the high-water mark, which
    // the broadcasts of ~4 KiB then pass.
    const posted = await broadcastWhile(gw, 'x'.repeat(16_000), () => sock.writableLength === 0)
      + await broadcastWhile(gw, 'x'.repeat(4000), () => sock.writableLength <= STALL_HIGH_WATER);
    // Every broadcast handed to the socket before the pings: the close can then only
    // come from the pongs, not from a late broadcast's own check of the buffer.
    await waitUntil('every broadcast written', async () => await framesSent(gw, 'bcast') === posted, 10_000, 20);
    assert.ok(sock.writableLength < HARD_CAP, `${sock.writableLength} bytes queued, under the cap`);
    const PINGS = 290;
    let pongs = 0;
    client.ws.on('pong', () => { pongs += 1; });
    for (let i = 0; i < PINGS; i++) client.ws.ping(Buffer.alloc(125));
    await waitUntil('the pongs pass the hard cap', async () => sock.writableLength > HARD_CAP || sock.destroyed, 10_000, 5);
    let code: number | undefined;
    void client.closed.then((closed) => { code = closed.code; });
    client.ws.resume();
    await waitUntil('the close, or every ping answered', async () => code !== undefined || pongs === PINGS, 20_000, 5);
    assert.equal(code, 4009, `${pongs} of ${PINGS} pongs, and no close`);
  } finally {
    await cleanup.run();
  }
});
