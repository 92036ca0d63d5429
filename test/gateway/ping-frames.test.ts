/**
 * WebSocket-level pings (RFC 6455 §5.5.2) are answered by the connection itself
 * (frame-handler.ts `ping`), within the limit on frames other than `ack`; and an
 * `ack` that moves no cursor (refused, a repeat, another epoch's) counts against a
 * budget of its own (docs/protocol.md, "Client → server"). `ws` answered pings itself and cut, without
 * a close code, a connection with more than 60 pongs unwritten: a burst of pings in
 * one packet was a 1006 counted as the client's and logged nowhere; and refused acks
 * were answered without limit (a security tester's findings).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONTROL_FRAME_WINDOW_MS, MAX_CONTROL_FRAMES, idleAckAllowance, idleAckLimitReason } from '../../src/gateway/frame-limits.js';
import { waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { closesByCode, expectPong, startGateway, type GatewayFixture } from './gateway-fixture.js';

let gw: GatewayFixture;
const LIMIT_REASON = `more than ${MAX_CONTROL_FRAMES} frames other than ack in ${CONTROL_FRAME_WINDOW_MS / 1000} s`;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'pings:' });
});

test('a burst of 200 WebSocket pings sent at once gets 200 pongs, each with its ping\'s data, and the connection stays open', async () => {
  const { client } = await gw.connectWelcomed('burst');
  const pongs: string[] = [];
  client.ws.on('pong', (data) => pongs.push(data.toString()));
  for (let i = 0; i < 200; i++) client.ws.ping(`p${i}`);
  await waitUntil('200 pongs', async () => pongs.length === 200, 10_000, 10);
  assert.deepEqual(pongs, Array.from({ length: 200 }, (_, i) => `p${i}`));
  await expectPong(client);
});

test(`WebSocket pings count as frames other than ack: one past the ${MAX_CONTROL_FRAMES} of the window closes 4003, counted as the server's`, async () => {
  const before = (await closesByCode(gw, 'server'))['4003'] ?? 0;
  const { client } = await gw.connectWelcomed('pinger');
  let pongs = 0;
  client.ws.on('pong', () => { pongs += 1; });
  for (let i = 0; i < MAX_CONTROL_FRAMES + 1; i++) client.ws.ping();
  const { code, reason } = await client.waitClose();
  assert.deepEqual([code, reason], [4003, LIMIT_REASON]);
  assert.equal(pongs, MAX_CONTROL_FRAMES);
  await waitUntil('the close counted by="server"', async () => ((await closesByCode(gw, 'server'))['4003'] ?? 0) === before + 1);
});

test('acks that move no cursor (refused, repeated, another epoch\'s) share a budget (700 by default, and one per msg sent): one past it closes 4003; acks that move the cursor do not count', async () => {
  const before = (await closesByCode(gw, 'server'))['4003'] ?? 0;
  const { client } = await gw.connectWelcomed('acker', { device: 'phone' });
  const seqs = await gw.post('acker', 2);
  await client.msgs(2);
  // Acks that move the cursor: not counted.
  for (const seq of seqs) client.ack(seq);
  const budget = idleAckAllowance(gw.config.deliveryWindow, gw.config.redeliveryBackoffMs.length);
  const refused = Math.floor(budget / 3);
  const otherEpoch = Math.floor(budget / 3);
  for (let i = 0; i < refused; i++) client.ack(999_999);
  for (let i = 0; i < otherEpoch; i++) client.send({ t: 'ack', seq: seqs[1] as number, epoch: 'an-epoch-gone' });
  // Each of the 2 msgs sent allows one more (a second ack of it).
  for (let i = refused + otherEpoch; i < budget + 2; i++) client.ack(seqs[i % 2] as number);
  await waitUntil('the refusals', async () => client.frames.filter((f) => f.t === 'error').length === refused, 10_000, 10);
  // They do not eat the 300 frames other than ack: a ping is still answered, after every ack before it.
  await expectPong(client);
  client.ack(seqs[1] as number);
  const { code, reason } = await client.waitClose();
  // The limit applied: the allowance and the 2 msgs' (the walk14 tester's F4).
  assert.deepEqual([code, reason], [4003, idleAckLimitReason(budget, 2)]);
  assert.equal(reason, `more than ${budget + 2} acks that moved no cursor in 30 s (${budget} + 2 for msgs sent)`);
  await waitUntil('the close counted by="server"', async () => ((await closesByCode(gw, 'server'))['4003'] ?? 0) === before + 1);
});
