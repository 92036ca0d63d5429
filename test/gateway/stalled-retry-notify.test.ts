/**
 * A retry's duplicate appends notify (docs/decisions.md "A retry's duplicate appends
 * notify too"): Redis stalls past the command timeout (CLIENT PAUSE WRITE), the POST
 * is 503, and Redis makes the appends once it writes again, with no notify sent for
 * them; the retry, answered `duplicate: true`, is the one left to notify, so a
 * connected device gets the message at once, not at its next heartbeat (25 s here).
 * One recipient and several: each path of the ingest (its one-user fast path, and
 * appendAll, which room messages share) notifies its own duplicates. (A room message's
 * first attempt cannot be stalled at its appends alone this way: its clock script is a
 * write too, so it fails before storing.) Its own redis-server and service, so no Redis restart or reconnect of
 * another test brings a heartbeat forward and delivers the message for it (as in
 * redis-loss.test.ts, whose stalled test passed without the notify after the restarts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { HttpAnswer } from '../harness/pixiu-server.js';
import type { TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

let gw: GatewayFixture;
let probe: Redis;

fileRedis(async ({ redis, cleanup }) => {
  // The default heartbeat (25 s): nothing here may wait for one.
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisCommandTimeoutMs: '300' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** Connected devices of `users`, each sent one message first (seq 1), so the stalled one is seq 2. */
async function connectedWithOne(users: readonly string[]): Promise<TestClient[]> {
  const devices: TestClient[] = [];
  for (const user of users) {
    const { client } = await gw.connectWelcomed(user);
    await gw.post(user);
    assert.equal((await client.next()).seq, 1);
    devices.push(client);
  }
  return devices;
}

/** POSTs `body` while Redis takes no writes (1 s; the command timeout is 300 ms): 503; then retries it until Redis writes again. */
async function postStalledThenRetry(body: Record<string, unknown>): Promise<HttpAnswer> {
  await probe.client('PAUSE', '1000', 'WRITE');
  const first = await gw.client.post('/v1/messages', body);
  assert.equal(first.status, 503, first.text);
  let retry = first;
  await waitUntil('a retry goes through once Redis writes again', async () => {
    retry = await gw.client.post('/v1/messages', body);
    return retry.status !== 503;
  }, 8000);
  // The first attempt's appends ran when the pause ended: the retry found them all.
  assert.equal(retry.status, 200, retry.text);
  assert.equal((retry.body as { duplicate: boolean }).duplicate, true, retry.text);
  return retry;
}

/** The next frame of each device is the stalled message, seq 2, now (not at the heartbeat 25 s away). */
async function eachGetsIt(devices: readonly TestClient[], data: string): Promise<void> {
  for (const device of devices) {
    const msg = await device.next(5000);
    assert.deepEqual([msg.t, msg.seq, msg.data], ['msg', 2, data], JSON.stringify(msg));
  }
}

test('one recipient: the retry that finds the stalled append notifies the connected device', async () => {
  const devices = await connectedWithOne(['one-stalled']);
  const retry = await postStalledThenRetry({ to: 'one-stalled', type: 't', data: 'one', client_msg_id: 'stalled-one' });
  assert.deepEqual((retry.body as { recipients: unknown }).recipients, [{ user: 'one-stalled', seq: 2 }]);
  await eachGetsIt(devices, 'one');
});

test('several recipients: the retry that finds every stalled append notifies each connected device', async () => {
  const devices = await connectedWithOne(['many-a', 'many-b']);
  const retry = await postStalledThenRetry({ to: ['many-a', 'many-b'], type: 't', data: 'many', client_msg_id: 'stalled-many' });
  assert.deepEqual((retry.body as { recipients: unknown }).recipients, [{ user: 'many-a', seq: 2 }, { user: 'many-b', seq: 2 }]);
  await eachGetsIt(devices, 'many');
});
