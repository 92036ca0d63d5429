/**
 * Redis went back in time under Pixiu (an unplanned failover to a replica that was
 * behind, a restore of an older snapshot) while a user's devices were away, and new
 * messages then took that user's inbox past the seq they had reached: the seqs Redis
 * lost are assigned again (an SRE's finding F1: a rolling repoint after such a failover
 * welcomed the devices past them, 106 acknowledged messages lost, no `gap`, no `reset`).
 * With the inbox generation raised (`pixiu redis lost-writes`, or a node that saw Redis
 * lose a write it had acknowledged to it: its own store lease back at an older renewal),
 * the inbox gets a new epoch at its next append, so a device resuming under the old one
 * is sent `reset` and every message Redis has (src/inbox/generation.ts, append-13.lua;
 * docs/decisions.md "The inbox generation"). A Redis restart with its AOF intact loses
 * nothing, and raises nothing.
 *
 * "Redis went back" is made without a replica: the keys are copied (DUMP) and given back
 * (RESTORE) after more writes, on a private redis-server; real service, real sockets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, runCli } from '../harness/pixiu-server.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';
import { expectFrame, expectMsgs, expectWelcome, postMany, snapshotInbox, startDelivery } from './delivery-fixture.js';
import { raiseGeneration } from '../../src/inbox/generation.js';
import { Keys } from '../../src/redis/keys.js';

/**
 * Posts 3 messages to `user` (kept), copies the inbox keys, posts 2 more (to be lost),
 * and has a device read and ack all 5 and leave.
 * @returns the kept ids, the epoch the device was given, and the copy's restore
 */
async function deliveredThenCopied(server: GatewayFixture, raw: Redis, keys: Keys, user: string, also: string[] = []): Promise<{ kept: string[]; epoch: string; restore: () => Promise<void> }> {
  const kept = await postMany(server.client, user, 3);
  const inboxCopy = await snapshotInbox(raw, keys.user(user));
  const copies = await Promise.all(also.map(async (key) => ({ key, dump: await raw.dumpBuffer(key) })));
  const lost = await postMany(server.client, user, 2, 4);
  const phone = await server.connect(user, { device: 'phone' });
  const epoch = (await expectWelcome(phone, 1, 5)).epoch as string;
  await expectMsgs(phone, 1, 5, [...kept, ...lost]);
  await phone.close();
  const restore = async (): Promise<void> => {
    await inboxCopy();
    for (const { key, dump } of copies) if (dump !== null) await raw.restore(key, 15_000, dump, 'REPLACE');
  };
  return { kept, epoch, restore };
}

/**
 * The device back with last_seq 5 of `epoch` after three new messages took seqs 4..6
 * again: it must be reset (a new epoch) and sent 1..6 — not welcomed after seq 5.
 */
async function expectResetAfterReuse(server: GatewayFixture, user: string, epoch: string, kept: string[]): Promise<void> {
  const fresh = await postMany(server.client, user, 3, 4);
  const phone = await server.connect(user, { device: 'phone', params: { last_seq: 5, epoch } });
  await expectFrame(phone, 'welcome');
  const next = await phone.next();
  assert.equal(next.t, 'reset', `the device (last_seq 5 of the old epoch) must be reset; got ${JSON.stringify(next)}: the new seqs 4 and 5 (${fresh.slice(0, 2).join(', ')}) would be skipped`);
  assert.notEqual(next.epoch, epoch);
  await expectMsgs(phone, 1, 6, [...kept, ...fresh]);
  await phone.close();
}

test('after Redis went back, `pixiu redis lost-writes` run before the nodes restart: a device resuming under the old epoch past the reused seqs is reset and sent every message Redis has', async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw: first, redis: raw } = await startDelivery(steps, 'lw1', { redisUrl: own.url });
  const keys = new Keys('lw1:');
  const user = 'fiona';
  const { kept, epoch, restore } = await deliveredThenCopied(first, raw, keys, user);

  // The failover: the node stops, Redis is the copy (latest 3, same epoch), the
  // operator runs the command, and the node starts again on it.
  await first.service.close();
  await restore();
  const run = await runCli(['redis', 'lost-writes'], { PIXIU_REDIS_URL: own.url, PIXIU_REDIS_PREFIX: 'lw1:' });
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^inbox generation raised from 0 to \d+ on redis:\/\/127\.0\.0\.1:\d+, key prefix "lw1:": every inbox gets a new epoch at its next append/);
  const { logger, lines } = capturingLogger();
  const again = await startGateway(steps, { redisPrefix: 'lw1:', storeDurability: 'relaxed', redisUrl: own.url, dataDir: first.config.dataDir }, logger);
  // The node started after the raise says which generation it read (redisops2 R2: an SRE could not confirm it).
  const generation = Number(await raw.get(keys.inboxGeneration()));
  const read = lines.filter((l) => String(l.msg).startsWith('inbox generation read at start'));
  assert.deepEqual(read.map((l) => [l.level, l.generation]), [[30, generation]], JSON.stringify(read));
  await expectResetAfterReuse(again, user, epoch, kept);
});

test('a running node takes a raised generation at its next registry renewal', { timeout: 30_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { logger, lines } = capturingLogger();
  const { gw: server, redis: raw } = await startDelivery(steps, 'lw2', { redisUrl: own.url }, logger);
  const keys = new Keys('lw2:');
  const user = 'rhea';
  const { kept, epoch, restore } = await deliveredThenCopied(server, raw, keys, user);
  await restore();
  assert.ok(!lines.some((l) => String(l.msg).startsWith('inbox generation read at start')), 'not logged for generation 0');
  await raiseGeneration(raw, keys);
  await waitUntil('the node read the raised generation', () => Promise.resolve(lines.some((l) => String(l.msg).startsWith('inbox generation raised'))), 12_000);
  await expectResetAfterReuse(server, user, epoch, kept);
});

test('a node whose store lease Redis gives back at an older renewal (Redis went back while it ran) raises the generation itself', { timeout: 40_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { logger, lines } = capturingLogger();
  const { gw: server, redis: raw } = await startDelivery(steps, 'lw3', { redisUrl: own.url }, logger);
  const keys = new Keys('lw3:');
  const [leaseKey] = await raw.keys('lw3:xiu:{store}:lease:*');
  assert.ok(leaseKey !== undefined);
  const renewalOf = async (): Promise<number> => (JSON.parse(await raw.get(leaseKey) ?? '{}') as { renewal?: number }).renewal ?? 0;
  const user = 'lena';
  const copiedAt = await renewalOf();
  const { kept, epoch, restore } = await deliveredThenCopied(server, raw, keys, user, [leaseKey]);
  // Redis acknowledged a later renewal, then goes back to the copy.
  await waitUntil('a lease renewal after the copy', async () => await renewalOf() > copiedAt, 12_000);
  await restore();
  await waitUntil('the generation raised by the node', async () => Number(await raw.get(keys.inboxGeneration()) ?? '0') > 0, 12_000);
  // Its line follows the raise's reply, which may be read after this test's GET of the raised value.
  await waitUntil('the raise logged with its reason', () => Promise.resolve(lines.some((l) => l.level === 50
    && String(l.msg).startsWith('Redis lost writes it had acknowledged (this node\'s store lease was back at renewal'))), 2000, 10);
  await expectResetAfterReuse(server, user, epoch, kept);
});

test('a Redis restart with its AOF intact raises nothing: a device resuming with its last_seq is welcomed after it, no reset', { timeout: 40_000 }, async (t) => {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start({ aof: true });
  steps.after(() => own.destroy());
  const { logger, lines } = capturingLogger();
  const { gw: server, redis: raw } = await startDelivery(steps, 'lw4', { redisUrl: own.url }, logger);
  const { inbox } = await openInbox(steps, own.url, 'lw4:');
  const keys = new Keys('lw4:');
  const [leaseKey] = await raw.keys('lw4:xiu:{store}:lease:*');
  assert.ok(leaseKey !== undefined);
  const renewalOf = async (): Promise<number> => (JSON.parse(await raw.get(leaseKey) ?? '{}') as { renewal?: number }).renewal ?? 0;
  const user = 'aoife';
  const ids = await postMany(server.client, user, 5);
  const phone = await server.connect(user, { device: 'phone' });
  const epoch = (await expectWelcome(phone, 1, 5)).epoch as string;
  await expectMsgs(phone, 1, 5, ids);
  await phone.close();

  await own.kill();
  await own.restart();
  // Two lease renewals on the restarted Redis (one at reconnect, one on the timer), and a registry renewal.
  const before = await renewalOf().catch(() => 0);
  await waitUntil('two lease renewals after the restart', async () => await renewalOf().catch(() => 0) >= before + 2, 15_000);
  assert.equal(await raw.get(keys.inboxGeneration()), null, 'no raise');
  assert.equal(lines.filter((l) => String(l.msg).startsWith('Redis lost writes')).length, 0);

  // The renewals have a connection of their own (pixiu:renewals): renewed on it, the
  // node's command connection may still be reconnecting.
  await waitUntil('the node is ready again', async () => (await server.client.get('/readyz')).status === 200, 15_000);
  const more = await postMany(server.client, user, 1, 6);
  const back = await server.connect(user, { device: 'phone', params: { last_seq: 5, epoch } });
  await expectWelcome(back, 6, 6);
  await expectMsgs(back, 6, 6, more, 6);
  // The test's own Redis connection reconnects on its own schedule, not the node's: read once it answers.
  let page: Awaited<ReturnType<typeof inbox.range>> | undefined;
  await waitUntil('the test\'s inbox read answers', async () => (page = await inbox.range(user, 0, 1).catch(() => undefined)) !== undefined, 15_000);
  assert.equal(page?.epoch, epoch, 'the epoch stays');
});
