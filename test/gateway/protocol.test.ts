/**
 * Client frames on an open connection (DESIGN.md §6): `ping` → `pong`; every bad frame
 * gets its documented answer (an `error` frame, or close 1009 for a frame over the cap,
 * 1007 for a text frame that is not UTF-8, 1008 for a message in too many fragments, or close 4003 after many) and leaves the connection and every ack cursor as they
 * were; the server's own heartbeat keeps a connection that answers pings and cuts one
 * that does not.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { openInbox, waitUntil, within } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken, type TestClient } from '../harness/ws-client.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { CONTROL_FRAME_WINDOW_MS, MAX_CONTROL_FRAMES } from '../../src/gateway/frame-limits.js';
import { JWT_KEY, closesByCode, expectPong, startGateway, type GatewayFixture } from './gateway-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
let inbox: Inbox;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  gw = await startGateway(cleanup, { redisUrl: redis.url });
  inbox = (await openInbox(cleanup, redis.url)).inbox;
});

after(async () => {
  // The private redis-server must die even when a clean-up step fails, or the run hangs.
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});

/** Posts one message to `user` and reads it on `client`, acking it: delivery still works. */
async function expectDelivery(client: TestClient, user: string): Promise<number> {
  const [seq] = await gw.post(user);
  const [msg] = await client.msgs(1, { ack: true });
  assert.equal(msg?.seq, seq);
  return seq as number;
}

test('ping is answered with pong', async () => {
  const { client } = await gw.connectWelcomed('pinger');
  client.send({ t: 'ping' });
  assert.deepEqual(await client.next(), { t: 'pong' });
  client.send('{"t":"ping"}');
  assert.deepEqual(await client.next(), { t: 'pong' });
});

test('each bad frame is answered with an error frame; the connection stays healthy after each', async () => {
  const { client } = await gw.connectWelcomed('frames');
  // `ref` as protocol.md's `error` row gives it: the frame's `t` when it is a known one
  // (a malformed ping's too: the walk14 tester's F5), none otherwise.
  const cases: Array<{ what: string; frame: string | Buffer; message: RegExp; ref?: object }> = [
    { what: 'not JSON', frame: 'hello', message: /not valid JSON/ },
    { what: 'JSON but not an object', frame: '[1,2]', message: /JSON object/ },
    { what: 'an unknown t', frame: '{"t":"shout"}', message: /unknown frame type/ },
    { what: 'no t', frame: '{"seq":1}', message: /"t"|frame type/ },
    { what: 'an ack with a string seq', frame: '{"t":"ack","seq":"1"}', message: /seq/, ref: { t: 'ack' } },
    { what: 'an ack with a negative seq', frame: '{"t":"ack","seq":-1}', message: /seq/, ref: { t: 'ack' } },
    { what: 'a ping with an unknown field', frame: '{"t":"ping","x":1}', message: /unknown field/, ref: { t: 'ping' } },
    { what: 'a refresh without a token', frame: '{"t":"refresh"}', message: /token/, ref: { t: 'refresh' } },
    { what: 'a binary frame', frame: Buffer.from('{"t":"ping"}'), message: /binary/ },
    { what: 'a sub frame with a malformed channel name', frame: '{"t":"sub","channel":"a b"}', message: /not a channel name/, ref: { t: 'sub', channel: 'a b' } },
  ];
  for (const { what, frame, message, ref } of cases) {
    client.ws.send(frame);
    const error = await client.next();
    assert.equal(error.t, 'error', `${what}: ${JSON.stringify(error)}`);
    assert.equal(error.code, 'INVALID_REQUEST', what);
    assert.match(String(error.message), message, what);
    assert.deepEqual(error.ref, ref, `${what}: its ref`);
    await expectPong(client);
    await expectDelivery(client, 'frames');
  }
});

test('an ack of a seq never sent, or with a string seq, is an error frame and moves no cursor', async () => {
  const { client: phone } = await gw.connectWelcomed('acker', { device: 'phone' });
  const { client: laptop } = await gw.connectWelcomed('acker', { device: 'laptop' });
  await gw.post('acker', 3);
  await phone.msgs(3);
  const laptopMsgs = await laptop.msgs(3);
  laptop.ack(laptopMsgs[0]?.seq as number);
  phone.ack(2);
  await waitUntil('both cursors written', async () => {
    const c = await inbox.cursors('acker');
    return c.phone === 2 && c.laptop === 1;
  });

  phone.ack(99);
  const never = await phone.next();
  assert.equal(never.t, 'error');
  assert.equal(never.code, 'INVALID_REQUEST');
  assert.match(String(never.message), /99.*above the last seq sent/);
  // Named, so that a client acking in a row can tell which ack was refused.
  assert.deepEqual(never.ref, { t: 'ack', seq: 99 });
  phone.send({ t: 'ack', seq: '3' });
  const malformed = await phone.next();
  assert.deepEqual([malformed.t, malformed.ref], ['error', { t: 'ack' }]);
  phone.send({ t: 'ack', seq: 2.5 });
  assert.equal((await phone.next()).t, 'error');
  // A good ack after the bad ones: its cursor is exactly 3, so none of them counted
  // (a cursor only grows, so 99 would have stuck).
  phone.ack(3);
  await expectPong(phone);
  await waitUntil('the good ack is written', async () => (await inbox.cursors('acker')).phone !== 2);
  assert.deepEqual(await inbox.cursors('acker'), { phone: 3, laptop: 1 });
  // Acking below the cursor changes nothing either.
  phone.ack(1);
  await expectPong(phone);
  await expectDelivery(phone, 'acker');
  await expectPong(laptop);
});

// pixiu_ws_closes_total{code}'s label values are a bounded set the server knows, not
// whatever a client puts in its close frame: a client may close with any code of
// 3000–4999 (RFC 6455 §7.4.2), and counted as is, any client with a token could mint
// ~2,000 series per node, each kept for the life of the process (docs/api.md).
test('close codes chosen by clients do not each become a pixiu_ws_closes_total series: they count as other', async () => {
  const codes = [3000, 3001, 3999, 4321, 4777, 4998];
  const total = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);
  const earlier = await closesByCode(gw);
  for (const code of codes) {
    const { client } = await gw.connectWelcomed(`closer-${code}`);
    client.ws.close(code, 'bye');
    await client.closed;
  }
  // Every close is counted once its connection is gone on the server too.
  await waitUntil('the six closes are counted', async () => total(await closesByCode(gw)) >= total(earlier) + codes.length);
  const counts = await closesByCode(gw);
  const minted = codes.map(String).filter((c) => c in counts);
  assert.deepEqual(minted, [], `client-chosen close codes became label values: ${Object.keys(counts).join(', ')}`);
  assert.equal(counts.other, (earlier.other ?? 0) + codes.length, 'each is counted as other');
});

test('a client that closes with one of the server\'s own codes (4009, 4008, 1011) is counted by="client", never among the closes the server decided', async () => {
  const codes = [4009, 4008, 1011];
  const [server, client] = [await closesByCode(gw, 'server'), await closesByCode(gw, 'client')];
  for (const code of codes) {
    const { client: ws } = await gw.connectWelcomed(`mimic-${code}`);
    ws.ws.close(code, 'not really');
    await ws.closed;
  }
  await waitUntil('the three closes are counted', async () => {
    const now = await closesByCode(gw, 'client');
    return codes.every((c) => (now[String(c)] ?? 0) === (client[String(c)] ?? 0) + 1);
  });
  assert.deepEqual(await closesByCode(gw, 'server'), server, 'nothing counted as the server\'s');
  // A close the server decides is by="server": a frame over the limit, 1009.
  const { client: big } = await gw.connectWelcomed('mimic-big');
  big.send({ t: 'ping', pad: 'x'.repeat(5 * 1024) });
  assert.equal((await big.waitClose()).code, 1009);
  await waitUntil('the 1009 is the server\'s', async () => ((await closesByCode(gw, 'server'))['1009'] ?? 0) === (server['1009'] ?? 0) + 1);
});

test('a 5 KiB frame closes the connection 1009, counted as 1009; the user reconnects fine', async () => {
  const closes = async (): Promise<number> => (await closesByCode(gw))['1009'] ?? 0;
  const before = await closes();
  const { client } = await gw.connectWelcomed('bigframe');
  client.send({ t: 'ping', pad: 'x'.repeat(5 * 1024) });
  const { code } = await client.waitClose();
  assert.equal(code, 1009);
  await waitUntil('the close is counted as 1009', async () => (await closes()) === before + 1);
  const { client: again } = await gw.connectWelcomed('bigframe');
  await expectPong(again);
  await expectDelivery(again, 'bigframe');
});

test('a text frame that is not valid UTF-8 closes the connection 1007 (RFC 6455 §8.1), counted as 1007; the user reconnects fine', async () => {
  const earlier = await closesByCode(gw);
  const { client } = await gw.connectWelcomed('badutf8');
  // A text frame (binary: false) whose bytes are not UTF-8: 0xC3 starts a two-byte
  // sequence that 0x28 does not continue.
  client.ws.send(Buffer.from([0x7b, 0xc3, 0x28, 0x7d]), { binary: false });
  const { code } = await client.waitClose();
  assert.equal(code, 1007);
  await expectCountedAs(earlier, '1007');
  const { client: again } = await gw.connectWelcomed('badutf8');
  await expectPong(again);
  await expectDelivery(again, 'badutf8');
});

test('a frame sent in fragments (as the JDK sends text over 16 KiB) is read whole: a ping in three pieces is answered', async () => {
  const { client } = await gw.connectWelcomed('pieces');
  client.ws.send('{"t":', { fin: false });
  client.ws.send('"pi', { fin: false });
  client.ws.send('ng"}', { fin: true });
  assert.deepEqual(await client.nextOf('pong'), { t: 'pong' });
  await expectDelivery(client, 'pieces');
});

test('a message in more fragments than ws takes (16,384) closes the connection 1008, counted as 1008; the user reconnects fine', async () => {
  const earlier = await closesByCode(gw);
  const { client } = await gw.connectWelcomed('fragments');
  // Empty fragments of one text message that never ends: only their number is over a limit.
  for (let i = 0; i <= 16 * 1024; i++) client.ws.send('', { fin: false });
  const { code } = await client.waitClose();
  assert.equal(code, 1008);
  await expectCountedAs(earlier, '1008');
  const { client: again } = await gw.connectWelcomed('fragments');
  await expectPong(again);
});

test('an unmasked client frame (RFC 6455 §5.1) closes the connection 1002, counted as the server\'s decision', async () => {
  const counted = async (): Promise<number> => (await closesByCode(gw, 'server'))['1002'] ?? 0;
  const before = await counted();
  const { client } = await gw.connectWelcomed('unmasked');
  // An empty text frame without the mask bit, written under `ws`'s own framing.
  (client.ws as unknown as { _socket: Socket })._socket.write(Buffer.from([0x81, 0x00]));
  assert.equal((await client.waitClose()).code, 1002);
  await waitUntil('the close is counted by="server" as 1002', async () => (await counted()) === before + 1, 5000);
});

/** Waits until the close is counted in pixiu_ws_closes_total under `label` (a close counted under another code never is). */
async function expectCountedAs(earlier: Record<string, number>, label: string): Promise<void> {
  await waitUntil(`the close is counted as ${label}`, async () => ((await closesByCode(gw))[label] ?? 0) === (earlier[label] ?? 0) + 1, 5000);
}

test('a frame just under the cap is handled as usual', async () => {
  const { client } = await gw.connectWelcomed('nearcap');
  const frame = JSON.stringify({ t: 'refresh', token: 'x'.repeat(4000) });
  assert.ok(Buffer.byteLength(frame) < 4096);
  client.send(frame);
  assert.equal((await client.next()).code, 'UNAUTHORIZED');
  await expectPong(client);
});

test('many malformed frames close the connection 4003', async () => {
  const { client } = await gw.connectWelcomed('abuser');
  for (let i = 0; i < 50; i++) client.send('not json');
  const { code } = await client.waitClose();
  assert.equal(code, 4003);
  const errors = client.frames.filter((f) => f.t === 'error').length;
  assert.ok(errors > 0 && errors < 50, `${errors} error frames before the close`);
});

test('more than 300 frames other than ack in a 30 s window close the connection 4003; acks are not counted', async () => {
  // Acks (each of a seq sent, moving the cursor) are not counted: 300 of them, then pings up to the limit, leave it open.
  const { client } = await gw.connectWelcomed('flooder', { device: 'phone' });
  // Read and acked while they are posted, as a client would: the 300 posts are fsynced
  // one by one (5 s alone, 15–17 s under load), and a client that acked none until the
  // last was posted saw its first window redelivered at the 10 s ack timeout; counting
  // those copies as messages, it stopped acking at seq 100 or 200.
  const [seqs] = await Promise.all([gw.post('flooder', 300), ackDistinct(client, 300)]);
  await waitUntil('the cursor reaches the last seq', async () => (await inbox.cursors('flooder')).phone === seqs.at(-1));
  for (let i = 1; i < MAX_CONTROL_FRAMES; i++) client.send({ t: 'ping' });
  await expectPong(client);
  assert.equal(client.frames.filter((f) => f.t === 'pong').length, MAX_CONTROL_FRAMES);
  // One more, in the same window: closed.
  client.send({ t: 'ping' });
  const { code, reason } = await client.waitClose();
  assert.deepEqual([code, reason], [4003, `more than ${MAX_CONTROL_FRAMES} frames other than ack in ${CONTROL_FRAME_WINDOW_MS / 1000} s`]);
  // The user connects again at once.
  const again = await gw.connectWelcomed('flooder', { device: 'phone' });
  await expectPong(again.client);
});

/**
 * Reads `msg` frames on `client`, acking each, until `n` distinct seqs were received: a
 * redelivered copy (marked `redelivered`) is acked again but not counted twice.
 */
async function ackDistinct(client: TestClient, n: number): Promise<void> {
  const seen = new Set<number>();
  while (seen.size < n) {
    const [msg] = await client.msgs(1, { ack: true });
    seen.add(msg?.seq as number);
  }
}

describe('server heartbeat', () => {
  const HEARTBEAT_MS = 100;
  const IDLE_MS = 400;
  let fast: GatewayFixture;
  before(async () => {
    fast = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'hb:', heartbeatMs: String(HEARTBEAT_MS), idleTimeoutMs: String(IDLE_MS) });
  });

  test('a client that answers pings stays connected well past the idle timeout', async () => {
    const { client } = await fast.connectWelcomed('alive');
    const openedAt = Date.now();
    let pings = 0;
    // Bounded: a server that stops pinging or cuts the client fails here, not at the suite's timeout.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${pings} pings in ${IDLE_MS * 3 + 3000} ms`)), IDLE_MS * 3 + 3000);
      client.ws.once('close', (code) => reject(new Error(`closed ${code} after ${pings} pings`)));
      client.ws.on('ping', () => {
        pings += 1;
        if (Date.now() - openedAt > IDLE_MS * 3) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const lived = Date.now() - openedAt;
    assert.ok(pings >= 3, `${pings} pings`);
    // One per heartbeat, not one per tick of the node's clock (half a heartbeat here).
    assert.ok(pings <= lived / HEARTBEAT_MS + 1, `${pings} pings in ${lived} ms, a heartbeat of ${HEARTBEAT_MS} ms`);
    assert.equal(client.ws.readyState, WebSocket.OPEN);
    await expectPong(client);
    // Closed now, not when the file ends: left open, a stall of the loaded test process
    // past the 400 ms idle timeout had it cut too, and the next case counted two 1006s.
    await client.close();
  });

  /** Opens a connection of `user` whose client never answers pings; resolves once open. */
  async function openMute(target: GatewayFixture, user: string): Promise<{ ws: WebSocket; closed: Promise<number> }> {
    const ws = new WebSocket(new URL('/v1/connect', target.url.replace(/^http/, 'ws')), {
      autoPong: false,
      headers: { authorization: `Bearer ${await testToken(JWT_KEY, user)}` },
    });
    ws.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('unexpected-response', () => reject(new Error('refused')));
    });
    return { ws, closed };
  }

  test('a client that never answers pings is closed after the idle timeout, counted as the server\'s 1006', async () => {
    const cut = (await closesByCode(fast, 'server'))['1006'] ?? 0;
    // The server's idle clock starts when it takes the connection: after `asked`, before
    // this side sees `open` (in a loaded process, up to tens of ms later: a CI run saw a
    // cut 397 ms after `open`). So the least is timed from the ask, the most from `open`.
    const asked = Date.now();
    const { ws, closed } = await openMute(fast, 'mute');
    const openedAt = Date.now();
    let pings = 0;
    ws.on('ping', () => {
      pings += 1;
    });
    // Bounded: a node that never cuts it fails here, naming the wait, not at the file's timeout.
    const code = await within(10_000, `the idle cut of a client that never answers pings (idle timeout ${IDLE_MS} ms)`, closed);
    const [sinceAsked, lived] = [Date.now() - asked, Date.now() - openedAt];
    assert.ok(pings >= 2, `${pings} pings went unanswered`);
    assert.ok(sinceAsked >= IDLE_MS && lived <= IDLE_MS + 1500, `closed ${sinceAsked} ms after the ask, ${lived} ms after open`);
    // Cut, not closed politely: a peer that does not answer pings may be gone.
    assert.equal(code, 1006);
    await waitUntil('presence drops the cut connection', async () => {
      const answer = await fast.client.get('/v1/users/mute/presence');
      return (answer.body as { online: boolean }).online === false;
    });
    await waitUntil('the cut is counted by="server"', async () => ((await closesByCode(fast, 'server'))['1006'] ?? 0) === cut + 1);
  });

  test('the idle cut comes within a tick of the idle timeout, not at the next heartbeat after it', async () => {
    // Heartbeats 2 s apart, idle timeout 2.2 s: checked only at heartbeats, the cut would come at 4 s.
    const slow = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'hb2:', heartbeatMs: '2000', idleTimeoutMs: '2200' });
    // The least timed from the ask, the most from `open`, as in the case above.
    const asked = Date.now();
    const { closed } = await openMute(slow, 'mute2');
    const openedAt = Date.now();
    assert.equal(await within(10_000, 'the idle cut of a client that never answers pings (idle timeout 2200 ms)', closed), 1006);
    const [sinceAsked, lived] = [Date.now() - asked, Date.now() - openedAt];
    assert.ok(sinceAsked >= 2200 && lived < 3200, `cut ${sinceAsked} ms after the ask, ${lived} ms after open (idle timeout 2200 ms, heartbeat 2000 ms)`);
  });
});

test('every frame written is counted by its type in pixiu_ws_frames_sent_total', async () => {
  // A node of its own: the counter is the node's, and a connection of an earlier case
  // still open on `gw` may be written to meanwhile (the `acker` laptop's unacked seqs go
  // out again, marked `redelivered`, 10, 12 and 16 s after its case: under load one such
  // round fell inside this case and `msg` counted 4).
  const alone = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'counted:' });
  const counts = async (): Promise<Record<string, number>> => {
    const text = (await alone.client.get('/metrics', { headers: { authorization: '' } })).text;
    return Object.fromEntries([...text.matchAll(/^pixiu_ws_frames_sent_total\{t="(\w+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]));
  };
  const before = await counts();
  const token = await testToken(JWT_KEY, 'counted', { channels: ['counted.news'], tags: ['counted-tag'] });
  // A last_bseq newer than anything the broadcast stream holds: a `reset` of that stream.
  const { client } = await alone.connectWelcomed('counted', { token, params: { last_bseq: '99999999999999-0' } });
  assert.equal((await client.next()).t, 'reset');
  await alone.post('counted');
  assert.equal((await client.next()).t, 'msg');
  client.send('not json');
  assert.equal((await client.next()).t, 'error');
  // Frames after a `sub` wait for it: the pong says the subscription is on.
  client.send({ t: 'sub', channel: 'counted.news' });
  await expectPong(client);
  assert.equal((await alone.client.post('/v1/channels/counted.news/publish', { type: 'n', data: 1 })).status, 201);
  assert.equal((await client.next()).t, 'pub');
  assert.equal((await alone.client.post('/v1/broadcast', { type: 'b', data: 1, tags: { all: ['counted-tag'] } })).status, 201);
  assert.equal((await client.next()).t, 'bcast');
  const after = await counts();
  for (const t of ['welcome', 'reset', 'msg', 'error', 'pong', 'pub', 'bcast']) {
    assert.equal((after[t] ?? 0) - (before[t] ?? 0), 1, `${t} frames counted: ${JSON.stringify({ before, after })}`);
  }
});
