/**
 * Kicks published while the node holding the connection has its bus subscriber away
 * (DESIGN.md §9): the kick reaches no one. That node is still registered — alive, its
 * subscriber reconnecting — so the kick is sent again, naming the connection, until it
 * is received (src/gateway/kicks.ts): a disconnect (DELETE /v1/users/{uid}/connections)
 * and a device's connection replaced by a newer one on another node (4002) alike. The
 * subscribers are kept away by refusing their SUBSCRIBE (ACL), publishing still allowed.
 * A subscriber away for longer than 10 s still gets its kick: it is sent again for as
 * long as a registration lives and one renewal more (20 s), not 10 s. The DELETE's
 * closed mark (presence-close-1) would close it too, at the connection's next refresh,
 * but Redis over maxmemory refuses the mark: then only the kick sent again closes it.
 * First, with the subscribers there: the kick itself closes the connection on the
 * other node at once (the closed mark would only close it at its next heartbeat, 25 s
 * away).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { REPLACED_REASON } from '../../src/gateway/kicks.js';
import { Keys } from '../../src/redis/keys.js';
import { pongsUntil, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';

let a: GatewayFixture;
let b: GatewayFixture;
let probe: Redis;
/** A's log. */
let aLines: LogLine[];

fileRedis(async ({ redis, cleanup }) => {
  const captured = capturingLogger();
  aLines = captured.lines;
  a = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' }, captured.logger);
  b = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** Cuts off both nodes' bus subscribers (CLIENT KILL of each). */
async function killSubscribers(): Promise<void> {
  const lines = (await probe.client('LIST') as string).split('\n').filter((l) => /\bname=pixiu:bus:/.test(l));
  for (const line of lines) await probe.client('KILL', 'ID', /\bid=(\d+)/.exec(line)?.[1] ?? '0');
}

/** Cuts off both subscribers and refuses their re-subscribes until {@link letSubscribersBack}. */
async function keepSubscribersAway(t: TestContext): Promise<void> {
  t.after(() => probe.acl('SETUSER', 'default', '+subscribe', '+psubscribe', '+ssubscribe'));
  await probe.acl('LOG', 'RESET');
  await probe.acl('SETUSER', 'default', '-subscribe', '-psubscribe', '-ssubscribe');
  await killSubscribers();
  await waitUntil('the re-subscribes are refused', async () => (await probe.acl('LOG') as unknown[]).length > 0);
}

/** Allows SUBSCRIBE again and cuts the subscribers once more, so that they reconnect and subscribe. */
async function letSubscribersBack(): Promise<void> {
  await probe.acl('SETUSER', 'default', '+subscribe', '+psubscribe', '+ssubscribe');
  await killSubscribers();
}

test('a DELETE on A closes the connection on B at once, by the kick over the bus (1008), not at its next heartbeat', async () => {
  // B's heartbeat is the default 25 s: only the kick can close it within seconds.
  const { client: phone } = await b.connectWelcomed('kicked-now', { device: 'phone' });
  const { client: laptop } = await b.connectWelcomed('kicked-now', { device: 'laptop' });
  const asked = Date.now();
  const answer = await a.client.request('DELETE', '/v1/users/kicked-now/connections?device=phone');
  assert.deepEqual(answer.body, { user: 'kicked-now', closed: 1 });
  assert.equal((await phone.waitClose(5000)).code, 1008);
  // The other device stays connected over the whole window the phone's close was given
  // (a kick sent again, or one closing the user's every connection a moment later, would
  // close it in there), and answers a ping at its end: not only at the phone's close.
  await pongsUntil(laptop, asked + 5000);
  await laptop.close();
});

test('a kick B\'s subscriber missed while away is sent again and closes the connection once it is back', async (t) => {
  const { client } = await b.connectWelcomed('kicked', { device: 'phone' });
  await keepSubscribersAway(t);

  const answer = await a.client.request('DELETE', '/v1/users/kicked/connections');
  assert.deepEqual(answer.body, { user: 'kicked', closed: 1 });

  await letSubscribersBack();
  const { code } = await client.waitClose(9000);
  assert.equal(code, 1008);
});

test('a kick B\'s subscriber missed while Redis, over maxmemory, refused the DELETE\'s closed mark is sent again and closes the connection', async (t) => {
  const { client } = await b.connectWelcomed('kicked-full', { device: 'phone' });
  const keys = new Keys('px:');
  assert.equal(await probe.exists(keys.conns('kicked-full')), 1, 'its presence entry is written');
  await keepSubscribersAway(t);
  // Over maxmemory the DELETE removes the entry unmarked (presence-close-1 is refused):
  // when B's subscriber is back, its refresh finds no mark and writes the entry back,
  // so only the kick sent again can close the connection.
  t.after(() => probe.config('SET', 'maxmemory', '0'));
  await probe.config('SET', 'maxmemory', '1');
  const answer = await a.client.request('DELETE', '/v1/users/kicked-full/connections');
  await probe.config('SET', 'maxmemory', '0');
  assert.deepEqual(answer.body, { user: 'kicked-full', closed: 1 });
  assert.equal(await probe.exists(keys.closed('kicked-full')), 0, 'no closed mark was written');

  await letSubscribersBack();
  assert.equal((await client.waitClose(9000)).code, 1008);
});

test('a kick B\'s subscriber missed for longer than 10 s is still sent again and closes the connection once it is back', { timeout: 60_000 }, async (t) => {
  const { client } = await b.connectWelcomed('kicked-late', { device: 'phone' });
  await keepSubscribersAway(t);

  const answer = await a.client.request('DELETE', '/v1/users/kicked-late/connections');
  assert.deepEqual(answer.body, { user: 'kicked-late', closed: 1 });
  // Away for longer than the 10 s kicks were sent again for before: the time is what is
  // tested, so a fixed wait (2 s past the old 10 s, 8 s inside the 20 s retry for the resubscribe).
  await delay(12_000);

  await letSubscribersBack();
  const { code } = await client.waitClose(9000);
  assert.equal(code, 1008);
  assert.deepEqual(aLines.filter((l) => /^kicks? not received/.test(String(l.msg))), [], 'A gave up on no kick');
});

test('a replacement kick (4002) B\'s subscriber missed while away is sent again and closes the old connection once it is back', async (t) => {
  const { client: old } = await b.connectWelcomed('moved', { device: 'phone' });
  await keepSubscribersAway(t);

  // The device connects again on A: its entry replaces B's, and the 4002 kick to B reaches no one.
  const { client: replacement } = await a.connectWelcomed('moved', { device: 'phone' });
  // The replacement leaves before B's subscriber is back. Otherwise the heartbeat B
  // brings forward when its subscriber comes back (gateway.ts, onResubscribed) would
  // find the old connection's entry replaced and close it 4002 too, with its own
  // reason; gone, the old connection's entry is written back instead, and only the
  // kick sent again closes it.
  await replacement.close();
  await waitUntil('the replacement is off presence', async () => {
    const { body } = await a.client.request('GET', '/v1/users/moved/presence');
    return (body as { connections: unknown[] }).connections.length === 0;
  });

  await letSubscribersBack();
  assert.deepEqual(await old.waitClose(9000), { code: 4002, reason: REPLACED_REASON });
});

test('a replacement kick (4002) whose PUBLISH Redis refused is sent again and closes the old connection once Redis takes it', async (t) => {
  const { client: old } = await b.connectWelcomed('refused', { device: 'phone' });
  t.after(() => probe.acl('SETUSER', 'default', '+publish'));
  await probe.acl('SETUSER', 'default', '-publish');

  // The device connects again on A: its entry replaces B's, and A's PUBLISH of the kick fails (NOPERM).
  const { client: replacement } = await a.connectWelcomed('refused', { device: 'phone' });
  t.after(() => replacement.close());
  await waitUntil('A logged the failed kick', async () => aLines.some((l) => String(l.msg).startsWith('kick could not be sent')));
  await probe.acl('SETUSER', 'default', '+publish');
  assert.deepEqual(await old.waitClose(9000), { code: 4002, reason: REPLACED_REASON });
});
