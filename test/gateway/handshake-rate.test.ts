/**
 * The per-user handshake rate on one node (`PIXIU_CONNECT_BURST`, `PIXIU_CONNECT_RATE`;
 * src/gateway/user-rate.ts), over real WebSockets: a user reconnecting in a loop is
 * refused 429 RATE_LIMITED with `Retry-After` once the burst is spent, before any Redis
 * read, while another user connects; a user whose devices follow the documented
 * back-off (docs/protocol.md, Close codes) is never refused.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConfigOverrides } from '../../src/config/config.js';
import { RedisServer } from '../harness/redis-server.js';
import { Refused, TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

/** A node of the test's own, on a redis-server of its own, with the default handshake limit unless `overrides` sets one. */
async function ownNode(t: TestContext, overrides: ConfigOverrides = {}): Promise<{ node: GatewayFixture; redis: RedisServer }> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  return { node: await startGateway(t, { redisUrl: redis.url, ...overrides }), redis };
}

/** Connects as `user` on `device`, reads the welcome and closes: one handshake; the refusal when refused. */
async function handshake(node: GatewayFixture, user: string, device: string): Promise<Refused | undefined> {
  let client: TestClient;
  try {
    client = await node.connect(user, { device });
  } catch (err) {
    if (err instanceof Refused) return err;
    throw err;
  }
  assert.equal((await client.next()).t, 'welcome');
  await client.close();
  return undefined;
}

test('a user reconnecting in a loop is refused 429 with Retry-After once the burst of 30 is spent; another user connects meanwhile', async (t) => {
  // The default limit: a burst of 30, then 60 a minute.
  const { node: gw } = await ownNode(t);
  let opened = 0;
  let refusal: Refused | undefined;
  // At 1 a second a handshake may come back while the loop runs: a few more than 30 at most.
  while (refusal === undefined && opened < 45) {
    refusal = await handshake(gw, 'looper', 'loop');
    if (refusal === undefined) opened++;
  }
  assert.ok(refusal, `${opened} handshakes in a row were admitted`);
  assert.ok(opened >= 30, `refused after ${opened}`);
  assert.equal(refusal.status, 429);
  assert.equal(refusal.headers.get('retry-after'), '1');
  assert.deepEqual(refusal.body, { error: { code: 'RATE_LIMITED', message: 'too many WebSocket handshakes for this user on this node (a burst of 30, then 1 a second: PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE); retry after 1 s' } });
  // Another user's bucket is their own.
  assert.equal(await handshake(gw, 'bystander', 'phone'), undefined);
});

test('a user\'s 5 devices reconnecting together, each after the shortest waits the documented back-off allows, are never refused', async (t) => {
  const { node: gw } = await ownNode(t);
  // Each device's handshakes at 0, 0.25, 0.75, 1.75 and 3.75 s: the back-off's 0.5, 1,
  // 2 and 4 s at the half its jitter allows; every connection fails at once (closed
  // after its welcome), so the back-off never resets. 25 handshakes in under 4 s.
  const waits = [0, 250, 500, 1000, 2000];
  const refusals = await Promise.all(['d1', 'd2', 'd3', 'd4', 'd5'].map(async (device) => {
    const refused: number[] = [];
    for (const [i, wait] of waits.entries()) {
      // The client's own back-off, not a wait for the server: a sleep is what is tested.
      await sleep(wait);
      const refusal = await handshake(gw, 'polite', device);
      if (refusal !== undefined) refused.push(i);
    }
    return refused;
  }));
  assert.deepEqual(refusals, [[], [], [], [], []]);
});

test('an over-limit handshake is refused before any Redis read: 429, not 503, with Redis stopped', async (t) => {
  // A burst of 2, then 1 a minute: the refusal says so, and to come back in a minute.
  const { node, redis: own } = await ownNode(t, { connectBurst: '2', connectRatePerMinute: '1', redisCommandTimeoutMs: '500' });
  assert.equal(await handshake(node, 'slow', 'a'), undefined);
  assert.equal(await handshake(node, 'slow', 'a'), undefined);
  const refusal = await handshake(node, 'slow', 'a');
  assert.equal(refusal?.status, 429);
  const retryAfter = Number(refusal.headers.get('retry-after'));
  assert.ok(retryAfter > 55 && retryAfter <= 60, `Retry-After: ${retryAfter}`);
  assert.match(String((refusal.body as { error: { message: string } }).error.message), /a burst of 2, then 1 a minute: PIXIU_CONNECT_BURST, PIXIU_CONNECT_RATE\); retry after \d+ s$/);
  own.pause();
  t.after(() => own.resume());
  // A handshake within the limit now reads Redis and fails 503; one over it does not get that far.
  assert.equal((await handshake(node, 'other', 'a'))?.status, 503);
  assert.equal((await handshake(node, 'slow', 'a'))?.status, 429);
});
