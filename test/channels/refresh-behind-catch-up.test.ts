/**
 * A `refresh` sent in time behind a `sub` whose `since` catch-up waits on backpressure
 * keeps the connection open past the old token's `exp` (src/gateway/frame-handler.ts:
 * its token is verified on arrival, docs/protocol.md "Client → server"). Before, it
 * waited in the connection's frame queue behind the catch-up, and a slow-reading
 * client that had refreshed in time was closed 4001 at the old `exp` (a review's
 * note). Its answer still keeps its turn: the channel it drops is told after the
 * catch-up's publications and before the `pong` of a `ping` sent after it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeJwt } from 'jose';
import { testToken, type Frame } from '../harness/ws-client.js';
import { JWT_KEY } from '../gateway/gateway-fixture.js';
import { publish } from './channel-fixture.js';
import { connectViewer, pausableGatewayForFile, pauseThenCatchUp } from './paused-catch-up.js';

const gateway = pausableGatewayForFile();

/** Lifetime of the token the connection opens with, s. */
const TTL_SEC = 15;

/** `exp` of a token, ms since the epoch. */
function expiryMs(token: string): number {
  const { exp } = decodeJwt(token);
  assert.equal(typeof exp, 'number');
  return (exp as number) * 1000;
}

test('a refresh sent before exp behind a catch-up held by backpressure keeps the connection open past the old exp, and is answered in its turn', { timeout: 60_000 }, async () => {
  const p = gateway();
  // The set-up below (connect, subscribe, publish, fill the socket, start the catch-up)
  // must end before the old exp, which is whole seconds, so over TTL_SEC - 1 s away:
  // under a second on a quiet machine, it is given over 13 s with the second kept below.
  // The test waits for that exp (it tests that nothing happens then): a longer TTL is
  // time the test takes.
  const token = await testToken(JWT_KEY, 'viewer', { channels: ['c.*'], ttlSec: TTL_SEC });
  const oldExpMs = expiryMs(token);
  const client = await connectViewer(p, token);
  for (const h of ['h1', 'h2', 'h3']) await publish(p.gw.client, 'c.x', h);
  await pauseThenCatchUp(p, client);
  const marginMs = oldExpMs - Date.now();
  assert.ok(marginMs > 1000, `the refresh is sent over a second before the old exp (${marginMs} ms before it: the set-up took over ${TTL_SEC * 1000 - 1000 - marginMs} ms)`);
  // A token for an hour that no longer allows c.x: its turn comes after the sub's.
  client.send({ t: 'refresh', token: await testToken(JWT_KEY, 'viewer', { channels: ['c.fill'], ttlSec: 3600 }) });
  client.send({ t: 'ping' });
  // The test is that nothing happens at the old exp: the connection clock closes a
  // connection within a tick (250 ms) of it, so wait a second past it, still not reading.
  await new Promise((resolve) => setTimeout(resolve, oldExpMs + 1000 - Date.now()));
  client.ws.resume();
  const pong = await client.nextOf('pong', 20_000);
  assert.deepEqual(pong, { t: 'pong' });
  assert.equal(client.ws.readyState, client.ws.OPEN, 'still open past the old exp');
  const frames = client.frames;
  const lastCatchUp = frames.findLastIndex((f: Frame) => f.t === 'pub' && f.channel === 'c.x');
  const errors = frames.filter((f: Frame) => f.t === 'error');
  assert.deepEqual(errors, [{
    t: 'error', code: 'FORBIDDEN', ref: { t: 'sub', channel: 'c.x' },
    message: 'the refreshed token no longer allows channel c.x: unsubscribed',
  }], 'the refresh was taken: it dropped c.x, and nothing else was refused');
  assert.deepEqual(frames.filter((f: Frame) => f.t === 'pub' && f.channel === 'c.x').map((f) => f.data), ['h1', 'h2', 'h3']);
  const dropped = frames.indexOf(errors[0] as Frame);
  assert.ok(lastCatchUp < dropped && dropped < frames.indexOf(pong), 'the catch-up, then the refresh\'s answer, then the pong');
});
