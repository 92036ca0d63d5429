/**
 * The order of what a client gets (docs/protocol.md): `welcome` first, whatever the
 * client sent right after the upgrade, and however long the inbox read it waits for
 * takes (only the control pong of a WebSocket ping may come before it); then answers
 * in the order of the frames they answer, including the asynchronous ones (`sub`,
 * `refresh`), each refusal of a `sub` or `refresh` naming the frame it refuses; and a
 * well-formed `sub` refused FORBIDDEN is not a "bad frame" towards the 4003 limit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileRedis } from '../harness/file-redis.js';
import { testToken, type Frame } from '../harness/ws-client.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { JWT_KEY, expectPong, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { clientFrame, rawUpgrade } from './raw-upgrade.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'ord:' });
});

/** Drops the variable `message` of error frames, to compare sequences of frames. */
function shape(f: Frame): Frame {
  if (f.t !== 'error') return f;
  const { message: _message, ...rest } = f;
  return rest;
}

/**
 * Sends an upgrade request for `user` with `frames` in the same write, so that they
 * arrive before the server can have read the inbox (before `welcome`), and collects
 * what comes back but `msg`s (error frames without their message) until `enough`
 * says so or the server sends its close frame.
 */
async function upgradeWithFrames(user: string, frames: Buffer[], enough: (got: Frame[]) => boolean): Promise<{ frames: Frame[]; closeCode: number | undefined }> {
  const conn = rawUpgrade(gw.url, await testToken(JWT_KEY, user), frames);
  const seen = (): Frame[] => conn.frames.filter((f) => f.t !== 'msg').map(shape);
  try {
    await conn.until(() => enough(seen()));
  } finally {
    conn.socket.destroy();
  }
  return { frames: seen(), closeCode: conn.closeCode() };
}

/** Counts the `pong`s among `frames`. */
function pongs(frames: Frame[]): number {
  return frames.filter((x) => x.t === 'pong').length;
}

test('welcome is the first frame even when client frames come with the upgrade request; they are answered after it, in order', async () => {
  await gw.post('early', 3);
  const { frames, closeCode } = await upgradeWithFrames('early', [
    clientFrame('{"t":"ping"}'),
    ...Array.from({ length: 20 }, () => clientFrame('{"t":"bogus"}')),
    clientFrame('{"t":"ack","seq":1}'),
    clientFrame('{"t":"ping"}'),
  ], (got) => pongs(got) === 2);
  assert.equal(closeCode, undefined);
  assert.equal(frames[0]?.t, 'welcome', `first frame: ${JSON.stringify(frames[0])}`);
  assert.deepEqual(frames.slice(1), [
    { t: 'pong' },
    ...Array.from({ length: 20 }, () => ({ t: 'error', code: 'INVALID_REQUEST' })),
    // The held ack was taken after welcome: no "ack before welcome" refusal.
    { t: 'pong' },
  ]);
});

test('a from=latest welcome whose inbox read is slow still comes first: a ping sent at open is answered after it, only a WebSocket ping\'s control pong before it', async () => {
  // A sectest observation (a `pong` with no `welcome` before it, under load): the
  // `welcome` of a user with an inbox waits for one read of the inbox's bounds; here it
  // takes 1.5 s, under the Redis command timeout (2 s), so no failure is logged.
  await gw.post('slowread', 2);
  const range = Inbox.prototype.range;
  Inbox.prototype.range = async function (this: Inbox, uid: string, afterSeq: number, limit: number) {
    if (uid === 'slowread') await new Promise((r) => setTimeout(r, 1500));
    return range.call(this, uid, afterSeq, limit);
  };
  try {
    // Timed from before the connect: the read starts when the server takes the
    // connection, before this side sees it open (later still in a loaded process).
    const askedAt = Date.now();
    const client = await gw.connect('slowread', { device: 'late', params: { from: 'latest' } });
    const order: string[] = [];
    client.ws.on('message', (data) => order.push(String((JSON.parse(data.toString()) as Frame).t)));
    client.ws.on('pong', () => order.push('(ws pong)'));
    client.send({ t: 'ping' });
    client.ws.ping();
    const welcome = await client.next();
    assert.ok(Date.now() - askedAt >= 1500, 'the welcome waited for the slow read');
    assert.deepEqual([welcome.t, welcome.seq, welcome.resume_from], ['welcome', 2, 3]);
    assert.deepEqual(await client.next(), { t: 'pong' });
    assert.deepEqual(order, ['(ws pong)', 'welcome', 'pong'], 'the control pong at once; the ping\'s pong behind welcome');
  } finally {
    Inbox.prototype.range = range;
  }
});

test('64 frames sent before welcome are held and answered after it; a 65th closes the connection 4003', async () => {
  const held = await upgradeWithFrames('holds64', Array.from({ length: 64 }, () => clientFrame('{"t":"ping"}')), (got) => pongs(got) === 64);
  assert.equal(held.closeCode, undefined);
  assert.deepEqual(held.frames.map((f) => f.t), ['welcome', ...Array.from({ length: 64 }, () => 'pong')]);
  const over = await upgradeWithFrames('holds65', Array.from({ length: 65 }, () => clientFrame('{"t":"ping"}')), () => false);
  assert.equal(over.closeCode, 4003, `frames before the close: ${JSON.stringify(over.frames)}`);
  assert.equal(pongs(over.frames), 0, 'the frames held are dropped with the connection');
});

test('answers to sub and refresh come in the order of the frames, and each refusal names its frame', async () => {
  const token = await testToken(JWT_KEY, 'orderly', { channels: ['ok.*'] });
  const { client } = await gw.connectWelcomed('orderly', { token, params: { from: 'latest' } });
  client.send({ t: 'sub', channel: 'no.way' });
  client.send({ t: 'sub', channel: 'ok.a', since: 'yesterday' });
  client.send({ t: 'refresh', token: 'not-a-jwt' });
  client.send({ t: 'sub', channel: 'ok.b' });
  client.send({ t: 'unsub', channel: 'bad name' });
  client.send({ t: 'ping' });
  const got: Frame[] = [];
  for (let i = 0; i < 6; i++) got.push(shape(await client.next()));
  assert.deepEqual(got, [
    { t: 'error', code: 'FORBIDDEN', ref: { t: 'sub', channel: 'no.way' } },
    { t: 'error', code: 'INVALID_REQUEST', ref: { t: 'sub', channel: 'ok.a' } },
    { t: 'error', code: 'UNAUTHORIZED', ref: { t: 'refresh' } },
    { t: 'subscribed', channel: 'ok.b', since: '0-0' },
    { t: 'error', code: 'INVALID_REQUEST', ref: { t: 'unsub', channel: 'bad name' } },
    { t: 'pong' },
  ]);
});

test('sub refused FORBIDDEN does not count towards the malformed-frame limit (4003)', async () => {
  const token = await testToken(JWT_KEY, 'curious', { channels: ['mine.*'] });
  const { client } = await gw.connectWelcomed('curious', { token, params: { from: 'latest' } });
  const N = 30;
  for (let i = 0; i < N; i++) client.send({ t: 'sub', channel: `other.${i}` });
  await expectPong(client);
  const refused = client.frames.filter((f) => f.t === 'error');
  assert.equal(refused.length, N);
  assert.ok(refused.every((f) => f.code === 'FORBIDDEN'));
  // Malformed frames still count: 20 are answered, the 21st closes 4003.
  for (let i = 0; i < 21; i++) client.send('not json');
  assert.equal((await client.waitClose()).code, 4003);
  assert.equal(client.frames.filter((f) => f.t === 'error').length, N + 20);
});
