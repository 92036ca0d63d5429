/**
 * A client closed 4003 that answers the close frame has its connection ended by the
 * server at once, not at the end of the 5 s grace (src/gateway/close-frame-spotter.ts,
 * receiver-refusals.ts `dropClientBytes`): the bytes after a 4003 are dropped unparsed,
 * and the answering close frame was dropped with them, so a client following RFC 6455
 * §7.1.1 (it waits for the server to close TCP) stayed in CLOSING for 5 s — a black-box
 * tester's finding, low. The server ends TCP with a FIN, after its close frame: the
 * client still gets 4003 and its reason. The walk of the dropped bytes' headers starts
 * where `ws`'s parser stopped, also inside a frame, and a payload that looks like a
 * close frame is not one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { MAX_CONTROL_FRAMES, controlFrameLimitReason } from '../../src/gateway/frame-limits.js';
import { CLOSE_GRACE_MS } from '../../src/gateway/server-close.js';
import { waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, closesByCode, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { PONG_FRAME, rawUpgrade, type RawConnection } from './raw-upgrade.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'closeanswer:' });
});

/** Well under the 5 s grace (half of it, with room for a loaded 2-core machine): what "at once" means here. */
const AT_ONCE_MS = CLOSE_GRACE_MS / 2;

/** A client frame (RFC 6455 §5.2), masked with a random key (§5.3). */
function maskedFrame(opcode: number, payload: Buffer, key: Buffer = randomBytes(4)): Buffer {
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x80 | opcode, 0x80 | n]) : Buffer.from([0x80 | opcode, 0x80 | 126, n >> 8, n & 0xff]);
  assert.ok(n < 65536);
  return Buffer.concat([head, key, Buffer.from(payload.map((b, i) => b ^ (key[i % 4] as number)))]);
}

/** The client's close frame answering the server's: the same code echoed (RFC 6455 §5.5.1). */
function closeAnswer(code: number): Buffer {
  const p = Buffer.alloc(2);
  p.writeUInt16BE(code, 0);
  return maskedFrame(0x8, p);
}

/** One past the window's frames other than ack: the connection is closed 4003 (docs/protocol.md). */
const POND = Buffer.concat(Array.from({ length: MAX_CONTROL_FRAMES + 1 }, () => PONG_FRAME));

/** How the client's TCP connection ended, and when (ms after `from`). */
interface Ending { readonly how: 'fin' | 'reset' | 'still open'; readonly ms: number }

/** Resolves with the first of: the server's FIN, a reset, or `withinMs` passing. */
function ending(conn: RawConnection, from: number, withinMs: number): Promise<Ending> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ how: 'still open', ms: performance.now() - from }), withinMs);
    conn.socket.once('end', () => { clearTimeout(timer); resolve({ how: 'fin', ms: performance.now() - from }); });
    conn.socket.once('error', () => { clearTimeout(timer); resolve({ how: 'reset', ms: performance.now() - from }); });
  });
}

/** Opens a raw connection for `user` and waits for `welcome`. */
async function welcomed(user: string): Promise<RawConnection> {
  const conn = rawUpgrade(gw.url, await testToken(JWT_KEY, user));
  await conn.until((got) => got.length > 0);
  assert.equal(conn.frames[0]?.t, 'welcome');
  return conn;
}

test('a client closed 4003 that answers with a masked close frame sees the server end TCP at once (a FIN, not a reset), with 4003 and its reason received', async () => {
  const before = (await closesByCode(gw, 'server'))['4003'] ?? 0;
  const conn = await welcomed('answerer');
  try {
    conn.socket.write(POND);
    await conn.until(() => false);
    assert.equal(conn.closeCode(), 4003);
    assert.equal(conn.closeReason(), controlFrameLimitReason);
    const from = performance.now();
    const ended = ending(conn, from, CLOSE_GRACE_MS + 2000);
    conn.socket.write(closeAnswer(4003));
    const end = await ended;
    assert.equal(end.how, 'fin');
    assert.ok(end.ms < AT_ONCE_MS, `ended ${Math.round(end.ms)} ms after the client's close frame, not at the ${CLOSE_GRACE_MS} ms grace`);
  } finally {
    conn.socket.destroy();
  }
  await waitUntil('the close counted by="server" as 4003', async () => ((await closesByCode(gw, 'server'))['4003'] ?? 0) === before + 1);
});

test('a close frame sent byte by byte, after data frames, ends the connection once its last byte arrives', async () => {
  const conn = await welcomed('trickler');
  try {
    conn.socket.write(POND);
    await conn.until(() => false);
    assert.equal(conn.closeCode(), 4003);
    conn.socket.write(Buffer.concat([maskedFrame(0x1, Buffer.from('{"t":"ping"}')), PONG_FRAME]));
    const close = closeAnswer(4003);
    for (let i = 0; i < close.length - 1; i++) {
      conn.socket.write(close.subarray(i, i + 1));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const quiet = await ending(conn, performance.now(), 200);
    assert.equal(quiet.how, 'still open', 'not ended before the close frame is whole');
    const from = performance.now();
    const ended = ending(conn, from, CLOSE_GRACE_MS + 2000);
    conn.socket.write(close.subarray(close.length - 1));
    const end = await ended;
    assert.equal(end.how, 'fin');
    assert.ok(end.ms < AT_ONCE_MS, `ended after ${Math.round(end.ms)} ms`);
  } finally {
    conn.socket.destroy();
  }
});

/**
 * A text frame of 176 bytes whose payload (masked with a zero key: sent as is) is made
 * of close frames: read as headers, its bytes would end the connection.
 */
const CLOSE_LOOKALIKE = (() => {
  const inner = closeAnswer(4003);
  const payload = Buffer.concat(Array.from({ length: 21 }, () => inner));
  return maskedFrame(0x1, payload, Buffer.alloc(4));
})();

// Where the frame is cut when the 4003 comes: `ws`'s parser holds its first bytes: 1 of
// its header; its 2-byte extended length half read; its mask half read; its payload begun.
for (const [cut, where] of [[1, 'its first byte'], [3, 'its extended length'], [6, 'its mask'], [20, 'its payload']] as const) {
  test(`the walk goes on where ws's parser stopped, inside a frame (${where}): a payload made of close frames is skipped, the close frame after it ends the connection`, async () => {
    const conn = await welcomed(`cut-${cut}`);
    try {
      // The pong that closes 4003 and the frame's first bytes in one write.
      conn.socket.write(Buffer.concat([POND, CLOSE_LOOKALIKE.subarray(0, cut)]));
      await conn.until(() => false);
      assert.equal(conn.closeCode(), 4003);
      conn.socket.write(CLOSE_LOOKALIKE.subarray(cut));
      const quiet = await ending(conn, performance.now(), 300);
      assert.equal(quiet.how, 'still open', 'the payload\'s close frames are not taken for the client\'s');
      const from = performance.now();
      const ended = ending(conn, from, CLOSE_GRACE_MS + 2000);
      conn.socket.write(closeAnswer(4003));
      const end = await ended;
      assert.equal(end.how, 'fin');
      assert.ok(end.ms < AT_ONCE_MS, `ended after ${Math.round(end.ms)} ms`);
    } finally {
      conn.socket.destroy();
    }
  });
}

test('a client that never answers is still cut at the close grace', async () => {
  const conn = await welcomed('silent');
  try {
    conn.socket.write(POND);
    await conn.until(() => false);
    assert.equal(conn.closeCode(), 4003);
    const from = performance.now();
    const end = await ending(conn, from, CLOSE_GRACE_MS + 3000);
    assert.notEqual(end.how, 'still open');
    assert.ok(end.ms > CLOSE_GRACE_MS - 500, `cut after ${Math.round(end.ms)} ms: at the grace`);
  } finally {
    conn.socket.destroy();
  }
});
