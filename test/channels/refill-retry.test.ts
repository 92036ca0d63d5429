/**
 * docs/protocol.md ("Channels"): after the node's Pub/Sub connection comes back, what
 * was published meanwhile comes from the history. A Redis restart may bring the
 * subscriber connection back before the node's command connection, over which the
 * refill reads the history: the refill's first reads then fail. It gave up on them —
 * the publications the history still held never came, and no `gap` said so (a black-box
 * walker's finding, two nodes on one Redis restarted). It reads again until Redis
 * answers, the live publications held meanwhile.
 *
 * Two proxies (test/harness/lag-proxy.ts) in a row, each matching one of the node's
 * connections by its name: the subscriber (`pixiu:bus:<node>`) and the command
 * connection (`pixiu`, matched by its CLIENT SETNAME argument as RESP writes it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { fileRedis } from '../harness/file-redis.js';
import { LagProxy } from '../harness/lag-proxy.js';
import { capturingLogger } from '../harness/log-capture.js';
import { waitUntil } from '../harness/checks.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { followThenCut, publish, publishMany, waitTopics } from './channel-fixture.js';

const captured = capturingLogger();
const RETRY_LOG = 'channel refill after the subscriber reconnected failed; its reads are tried again until Redis answers, live publications held meanwhile';
let started: { gw: GatewayFixture; subscriber: LagProxy; commands: LagProxy; probe: Redis } | undefined;

fileRedis(async ({ redis, cleanup }) => {
  const subscriber = await LagProxy.start({ host: '127.0.0.1', port: redis.port }, 'pixiu:bus:');
  cleanup.after(() => subscriber.close());
  const commands = await LagProxy.start({ host: '127.0.0.1', port: Number(new URL(subscriber.url).port) }, '$5\r\npixiu\r\n');
  cleanup.after(() => commands.close());
  const gw = await startGateway(cleanup, { redisUrl: commands.url, storeDurability: 'relaxed', channelHistory: '10' }, captured.logger);
  const probe = new Redis(redis.url);
  cleanup.after(() => probe.quit());
  started = { gw, subscriber, commands, probe };
});

test('a refill whose reads fail because the command connection is not back yet reads again once it is: what the history held arrives, in order, once each', { timeout: 30_000 }, async () => {
  assert.ok(started);
  const { gw, subscriber, commands, probe } = started;
  const { client } = await followThenCut(gw, 'viewer', 'r.a', (on) => subscriber.cut(on), probe);
  const during = await publishMany(gw.client, 'r.a', 3, (i) => `d${i}`);
  // The command connection goes; the subscriber comes back: the refill's reads fail.
  const from = captured.lines.length;
  commands.cut(true);
  subscriber.cut(false);
  await waitTopics(probe, 'px:', { 'r.a': true });
  await waitUntil('the refill says its reads are tried again', async () => captured.lines.slice(from).some((l) => l.msg === RETRY_LOG), 10_000, 50);
  commands.cut(false);
  for (const [i, data] of ['d1', 'd2', 'd3'].entries()) {
    const f = await client.next(10_000);
    assert.deepEqual({ t: f.t, id: f.id, data: f.data }, { t: 'pub', id: during[i], data }, JSON.stringify(f));
  }
  await waitUntil('the refill says its read succeeded', async () => captured.lines.slice(from).some((l) => l.msg === 'channel refill after the subscriber reconnected read the history' && l.channel === 'r.a'), 10_000, 50);
  // Then live again, nothing in between.
  const after = await publish(gw.client, 'r.a', 'after');
  const f = await client.next(10_000);
  assert.deepEqual({ t: f.t, id: f.id }, { t: 'pub', id: after }, JSON.stringify(f));
});

test('a refill whose reads fail for 30 s gives up: the live publications it held go out, and what it could not read is logged as lost', { timeout: 90_000 }, async () => {
  assert.ok(started);
  const { gw, subscriber, commands, probe } = started;
  const { client } = await followThenCut(gw, 'giver', 'r.b', (on) => subscriber.cut(on), probe);
  await publish(gw.client, 'r.b', 'missed');
  const from = captured.lines.length;
  commands.cut(true);
  subscriber.cut(false);
  await waitTopics(probe, 'px:', { 'r.b': true });
  const gaveUp = 'channel refill after the subscriber reconnected failed for 30 s; publications made while it was down are lost for this channel';
  await waitUntil('the refill gives up', async () => captured.lines.slice(from).some((l) => l.msg === gaveUp && l.channel === 'r.b'), 45_000, 100);
  commands.cut(false);
  await waitUntil('the node takes requests again', async () => (await gw.client.get('/readyz')).status === 200, 15_000, 100);
  // Live again: the next publication is the next frame; `missed` never comes.
  const after = await publish(gw.client, 'r.b', 'after');
  const f = await client.next(10_000);
  assert.deepEqual({ t: f.t, id: f.id, data: f.data }, { t: 'pub', id: after, data: 'after' }, JSON.stringify(f));
});
