/**
 * The limit on frames other than `ack` (docs/protocol.md, "Client → server";
 * src/gateway/frame-limits.ts) counts bad frames too, not only `ping`, `refresh`, `sub`
 * and `unsub`: a client at the limit is closed 4003 by its next frame, whether that
 * frame is well formed or not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileRedis } from '../harness/file-redis.js';
import { controlFrameLimitReason, MAX_BAD_FRAMES, MAX_CONTROL_FRAMES } from '../../src/gateway/frame-limits.js';
import { expectPong, startGateway, type GatewayFixture } from './gateway-fixture.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url });
});

test('a malformed frame past the limit on frames other than ack closes the connection 4003 for that limit, though few bad frames were sent', async () => {
  const { client } = await gw.connectWelcomed('mixer');
  // One bad frame first: answered, well under the bad-frame limit.
  client.send('not json');
  assert.equal((await client.nextOf('error')).code, 'INVALID_REQUEST');
  // Pings up to the limit (the bad frame and expectPong's ping included).
  for (let i = 2; i < MAX_CONTROL_FRAMES; i++) client.send({ t: 'ping' });
  await expectPong(client);
  // A second bad frame, far below the bad-frame limit (MAX_BAD_FRAMES), but one frame over the limit.
  client.send('still not json');
  const { code, reason } = await client.waitClose();
  assert.deepEqual([code, reason], [4003, controlFrameLimitReason]);
});

test('each of the first MAX_BAD_FRAMES malformed frames is answered with an error frame on an open connection; the next one closes it 4003', async () => {
  const { client } = await gw.connectWelcomed('twenty');
  for (let i = 0; i < MAX_BAD_FRAMES; i++) client.send('not json');
  // The pong comes after every answer: the connection is still open after all of them.
  await expectPong(client);
  assert.equal(client.frames.filter((f) => f.t === 'error').length, MAX_BAD_FRAMES);
  client.send('not json');
  const { code, reason } = await client.waitClose();
  assert.deepEqual([code, reason], [4003, 'too many malformed frames']);
});
