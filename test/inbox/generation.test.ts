/**
 * The inbox generation (src/inbox/generation.ts, append-13.lua step 1,
 * generation-raise-2.lua; docs/decisions.md "The inbox generation"): an inbox appended
 * under a higher generation than its epoch was made under gets a new epoch first (its
 * seqs go on, its ack cursors are kept with the old epoch); a node with a stale, lower generation never rotates
 * one back; a raise is above Redis's time and every generation before it; a node that
 * reads a lower generation than it held (Redis went back) raises it past its own; a
 * rotation (rotate-7.lua) records the generation it was made under, so the next append
 * does not rotate again; a raise owed by a failure takes one made since (the operator's)
 * instead of raising past it.
 * Real Redis (a private redis-server), no mocks.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { capturingLogger } from '../harness/log-capture.js';
import { createRedis, redisNowMs } from '../../src/redis/client.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { InboxGeneration, raiseGeneration } from '../../src/inbox/generation.js';
import { Keys } from '../../src/redis/keys.js';

let server: RedisServer;
let redis: Redis;
const keys = new Keys('gen:');

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
});

after(async () => {
  await redis?.quit();
  await server?.destroy();
});

/** The n-th test MsgID. */
function msgId(n: number): string {
  return encodeMsgId({ partition: 0, kind: MsgKind.user, counter: n });
}

/** An Inbox whose appends pass the generation `gen.value` holds at each append. */
function inboxAt(gen: { value: number }): Inbox {
  return new Inbox(redis, { prefix: 'gen:', cap: 100, generation: () => gen.value });
}

test('an append under a higher generation gives the inbox a new epoch first (seqs go on, ack cursors kept with the old epoch); a stale lower one never rotates it back; the same one rotates once', async () => {
  const uid = 'gina';
  const node = { value: 0 };
  const stale = { value: 0 };
  const inbox = inboxAt(node);
  const old = inboxAt(stale);
  const first = await inbox.append(uid, msgId(1), MsgKind.user);
  await inbox.append(uid, msgId(2), MsgKind.user);
  await inbox.ack(uid, 'phone', 2);
  assert.equal(await redis.hget(keys.meta(uid), 'gen'), null, 'generation 0 is not recorded');

  node.value = 1_000;
  const rotated = await inbox.append(uid, msgId(3), MsgKind.user);
  assert.notEqual(rotated.epoch, first.epoch, 'a new epoch');
  assert.equal(rotated.seq, 3, 'the seqs go on from what Redis kept');
  assert.deepEqual(await inbox.cursors(uid), {}, 'the old epoch\'s cursors leave the acks hash');
  assert.deepEqual(await inbox.deviceCursor(uid, 'phone'), { seq: 2, epoch: first.epoch }, 'kept with the epoch they count in');
  assert.equal(await redis.hget(keys.meta(uid), 'gen'), '1000');
  assert.equal((await inbox.range(uid, 0, 10)).epoch, rotated.epoch);

  // The same generation again: no second rotation.
  const again = await inbox.append(uid, msgId(4), MsgKind.user);
  assert.equal(again.epoch, rotated.epoch);

  // A node that has not read the raise yet (0): appends under the current epoch, rotates nothing back.
  const fromStale = await old.append(uid, msgId(5), MsgKind.user);
  assert.equal(fromStale.epoch, rotated.epoch, 'a lower generation never rotates');
  assert.equal(fromStale.seq, 5);
  assert.equal(await redis.hget(keys.meta(uid), 'gen'), '1000', 'nor lowers the one recorded');
  stale.value = 999;
  assert.equal((await old.append(uid, msgId(6), MsgKind.user)).epoch, rotated.epoch);
});

test('a rotation (a resume above the latest, or a delivery that saw less) records the generation the node holds: the next append under it does not rotate again; a lower one is not recorded (redisops2 R1)', async () => {
  const uid = 'rosa';
  const node = { value: 0 };
  const inbox = inboxAt(node);
  const first = await inbox.append(uid, msgId(1), MsgKind.user);
  await inbox.append(uid, msgId(2), MsgKind.user);

  // Redis went back and the generation was raised; this node read it, then a device
  // came back above the latest: the resume rotation (cool-down armed) is made under 2000.
  node.value = 2_000;
  const rotated = await inbox.rotateEpoch(uid, first.epoch, 60_000);
  assert.ok(rotated !== null && rotated !== first.epoch);
  assert.equal(await redis.hget(keys.meta(uid), 'gen'), '2000');
  const next = await inbox.append(uid, msgId(3), MsgKind.user);
  assert.equal(next.epoch, rotated, 'one reset for one loss: the append does not rotate the epoch a second time');
  assert.equal(next.seq, 3);

  // A node holding a lower generation rotates (a proven loss) without lowering it; generation 0 records nothing.
  const stale = inboxAt({ value: 1_000 });
  const again = await stale.rotateEpoch(uid, rotated);
  assert.ok(again !== null && again !== rotated);
  assert.equal(await redis.hget(keys.meta(uid), 'gen'), '2000', 'never lowered');
  const fresh = 'rosa-0';
  await new Inbox(redis, { prefix: 'gen:', cap: 100 }).append(fresh, msgId(4), MsgKind.user);
  await new Inbox(redis, { prefix: 'gen:', cap: 100 }).rotateEpoch(fresh, (await inbox.range(fresh, 0, 1)).epoch as string);
  assert.equal(await redis.hget(keys.meta(fresh), 'gen'), null, 'generation 0 is not recorded');
});

test('a new inbox records the generation it was made under; a duplicate append under a higher one rotates too, answering the first seq under the new epoch', async () => {
  const uid = 'nina';
  const node = { value: 500 };
  const inbox = inboxAt(node);
  const made = await inbox.append(uid, msgId(1), MsgKind.user);
  assert.equal(await redis.hget(keys.meta(uid), 'gen'), '500');
  assert.equal((await inbox.append(uid, msgId(2), MsgKind.user)).epoch, made.epoch, 'no rotation at the generation it was made under');
  node.value = 501;
  const dup = await inbox.append(uid, msgId(1), MsgKind.user);
  assert.equal(dup.duplicate, true);
  assert.equal(dup.seq, 1);
  assert.notEqual(dup.epoch, made.epoch);
  assert.equal(await redis.hget(keys.meta(uid), 'gen'), '501');
  assert.equal(await redis.xlen(keys.inbox(uid)), 2, 'nothing appended by the duplicate');
});

test('raiseGeneration (pixiu redis lost-writes) sets the generation above Redis\'s time and the one before; InboxGeneration takes a raise at its next refresh', async () => {
  const { logger } = capturingLogger();
  const node = new InboxGeneration(redis, keys, logger);
  await node.refresh();
  const held = node.current;
  const before = await redisNowMs(redis);
  const raise = await raiseGeneration(redis, keys);
  assert.equal(raise.before, held);
  assert.ok(raise.after >= before && raise.after > held, `raised to ${raise.after}, Redis's time was ${before}`);
  assert.equal(node.current, held, 'not seen before the next refresh');
  await node.refresh();
  assert.equal(node.current, raise.after);
  const second = await raiseGeneration(redis, keys);
  assert.ok(second.after > raise.after, 'each raise goes higher');
});

/**
 * Two nodes' views of the generation (A on `aRedis`, B on the test's connection), both
 * holding a raise made just before; their log lines.
 */
async function twoNodes(aRedis: Redis): Promise<{ a: InboxGeneration; b: InboxGeneration; lines: ReturnType<typeof capturingLogger>['lines']; held: number }> {
  const { logger, lines } = capturingLogger();
  const a = new InboxGeneration(aRedis, keys, logger);
  const b = new InboxGeneration(redis, keys, logger);
  await raiseGeneration(redis, keys);
  await a.refresh();
  await b.refresh();
  return { a, b, lines, held: a.current };
}

test('a node that reads a lower generation than it held (Redis went back) raises it past its own; lost writes seen by two nodes raise it once', async () => {
  const { a, b, lines, held } = await twoNodes(redis);
  // Redis restored from a snapshot taken before that raise: the key is back at 7.
  await redis.set(keys.inboxGeneration(), '7');
  await a.refresh();
  assert.ok(a.current > held, `raised past the generation held (${held}): ${a.current}`);
  assert.equal(Number(await redis.get(keys.inboxGeneration())), a.current);
  assert.ok(lines.some((l) => l.level === 50 && String(l.msg).startsWith('Redis lost writes it had acknowledged (the inbox generation in Redis went back')));

  // Two nodes see one loss (their store leases, say): one raise, the other takes it.
  await a.refresh();
  await b.refresh();
  const now = a.current;
  await Promise.all([a.lostWrites('seen by a'), b.lostWrites('seen by b')]);
  assert.equal(a.current, b.current, 'both hold the one raise');
  assert.ok(a.current > now);
  const raisedHere = lines.filter((l) => l.raisedHere === true && ['seen by a', 'seen by b'].includes(String(l.reason)));
  assert.equal(raisedHere.length, 1, 'raised by one node only');
});

test('lost writes seen while Redis\'s generation went back below the one held (the loss took the last raise too) raise it past the one held; the read after finds nothing more to do (review1 F1)', async () => {
  const { logger, lines } = capturingLogger();
  const node = new InboxGeneration(redis, keys, logger);
  await raiseGeneration(redis, keys);
  await node.refresh();
  const held = node.current;
  // Redis went back to before that raise (a failover to a replica behind it, an older
  // snapshot); the node's store lease check sees it first, as it does after a reconnect.
  await redis.set(keys.inboxGeneration(), '7');
  await node.lostWrites('this node\'s store lease was back at renewal 3, after Redis had acknowledged renewal 5');
  assert.ok(node.current > held, `raised past the generation held (${held}), not taken back to 7: ${node.current}`);
  assert.equal(Number(await redis.get(keys.inboxGeneration())), node.current);
  const raised = lines.filter((l) => String(l.reason).startsWith('this node\'s store lease was back'));
  assert.equal(raised.length, 1);
  assert.equal(raised[0]?.raisedHere, true);

  // The registry renewal's read comes next: the same value, no second raise.
  const now = node.current;
  await node.refresh();
  assert.equal(node.current, now);
  assert.equal(Number(await redis.get(keys.inboxGeneration())), now);

  // An inbox that recorded the lost raise is rotated by the new one.
  const uid = 'lowe';
  await redis.hset(keys.meta(uid), 'epoch', 'old-epoch', 'seq', '3', 'gen', String(held));
  const append = await new Inbox(redis, { prefix: 'gen:', cap: 100, generation: () => node.current }).append(uid, msgId(1), MsgKind.user);
  assert.notEqual(append.epoch, 'old-epoch', 'a new epoch past the lost raise');
});

test('an unreadable generation set by hand (16 digits, "1e16") is logged once and not taken: appends go on under the one held, and a raise writes a readable one over it (review1 F5)', async () => {
  const { logger, lines } = capturingLogger();
  const node = new InboxGeneration(redis, keys, logger);
  await raiseGeneration(redis, keys);
  await node.refresh();
  const held = node.current;
  const inbox = new Inbox(redis, { prefix: 'gen:', cap: 100, generation: () => node.current });
  const unreadable = (): number => lines.filter((l) => String(l.msg).startsWith('the inbox generation in Redis is unreadable')).length;

  await redis.set(keys.inboxGeneration(), '9000000000000000');
  await node.refresh();
  await node.refresh();
  assert.equal(node.current, held, 'the one held stays');
  assert.equal(unreadable(), 1, 'logged once while it stays');
  assert.equal(lines.find((l) => String(l.msg).startsWith('the inbox generation in Redis is unreadable'))?.level, 50);
  const appended = await inbox.append('sixteen', msgId(1), MsgKind.user);
  assert.equal(appended.seq, 1, 'the append is not refused');

  // "1e16" is read as no number by the nodes and as 10^16 by Lua: neither takes it, and a raise replaces it.
  await redis.set(keys.inboxGeneration(), '1e16');
  await node.refresh();
  assert.equal(unreadable(), 2, 'another unreadable value is logged');
  await node.lostWrites('this store\'s claim was gone');
  assert.ok(node.current > held, `raised past the one held: ${node.current}`);
  assert.equal(await redis.get(keys.inboxGeneration()), String(node.current), 'a readable value written over it');
  assert.equal((await inbox.append('sixteen', msgId(2), MsgKind.user)).seq, 2);

  // The operator's command over an unreadable value: from 0, to a readable one.
  await redis.set(keys.inboxGeneration(), 'x'.repeat(20));
  await delay(5); // Redis's clock past the one held: the raise from 0 is TIME
  const raise = await raiseGeneration(redis, keys);
  assert.equal(raise.before, 0);
  assert.match(String(raise.after), /^\d{13,15}$/);
  await node.refresh();
  assert.equal(node.current, raise.after);

  // A raise from the highest value the scripts take goes past 15 digits: not taken either.
  await redis.set(keys.inboxGeneration(), '999999999999999');
  await node.refresh();
  assert.equal(node.current, 999_999_999_999_999);
  await node.lostWrites('seen at the bound');
  assert.equal(node.current, 999_999_999_999_999);
  assert.ok(lines.some((l) => l.level === 50 && String(l.msg).startsWith('the inbox generation was raised past 15 digits')));
  assert.equal((await inbox.append('sixteen', msgId(3), MsgKind.user)).seq, 3, 'the append is not refused');
  await redis.del(keys.inboxGeneration());
});

test('a raise that failed as Redis came back, retried after the operator\'s (or another node\'s) raise was read, takes that raise: one new epoch per user for the loss, not two (chaos walk F2)', async (t) => {
  // Node A's own connection, which is still reconnecting when its lease check sees the loss.
  const aRedis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  t.after(() => aRedis.quit().catch(() => undefined));
  const { a, b, lines, held } = await twoNodes(aRedis);
  const uid = 'twyla';
  const viaA = new Inbox(redis, { prefix: 'gen:', cap: 100, generation: () => a.current });
  const viaB = new Inbox(redis, { prefix: 'gen:', cap: 100, generation: () => b.current });
  const before = (await viaA.append(uid, msgId(1), MsgKind.user)).epoch;

  // Redis went back; A's lease check sees it while A's connection is down: the raise is owed.
  aRedis.disconnect();
  await a.lostWrites('this node\'s store lease was back at renewal 7, after Redis had acknowledged renewal 9');
  assert.equal(a.current, held, 'not raised: Redis unavailable to A');
  // The operator runs pixiu redis lost-writes; both nodes read it at their registry renewal.
  const operator = await raiseGeneration(redis, keys);
  await aRedis.connect();
  await a.refresh();
  await b.refresh();
  assert.equal(b.current, operator.after);
  assert.equal(a.current, operator.after, 'A takes the operator\'s raise, made after the loss it saw, and does not raise past it');
  assert.equal(Number(await redis.get(keys.inboxGeneration())), operator.after);
  const retried = lines.filter((l) => String(l.reason).startsWith('this node\'s store lease was back at renewal 7') && l.level === 50);
  assert.equal(retried.length, 1);
  assert.equal(retried[0]?.raisedHere, false);

  // Appends through both nodes: the user's inbox gets one new epoch for the one loss.
  const epochs = new Set<string>([before]);
  for (let n = 2; n <= 5; n += 1) epochs.add((await (n % 2 === 0 ? viaB : viaA).append(uid, msgId(n), MsgKind.user)).epoch);
  assert.equal(epochs.size, 2, `one rotation for one loss, got epochs ${[...epochs].join(', ')}`);
});

test('a second loss seen while a raise is owed, after a raise was read since, is raised past that raise: not taken as covering a loss seen after it (review of the chaos F2 mend)', async (t) => {
  // Node A's connection, as a user whose scripts can be refused while its reads go on.
  await redis.acl('SETUSER', 'gen-node-a', 'on', '>gen-node-a-pw', '~*', '&*', '+@all');
  const url = new URL(server.url);
  url.username = 'gen-node-a';
  url.password = 'gen-node-a-pw';
  const aRedis = await createRedis({ url: url.toString(), commandTimeoutMs: 5000 });
  // Closed before its user is deleted: a client whose user is gone reconnects for ever.
  t.after(async () => {
    aRedis.disconnect();
    await redis.acl('DELUSER', 'gen-node-a');
  });
  const { logger } = capturingLogger();
  const a = new InboxGeneration(aRedis, keys, logger);
  await a.refresh();
  // A's raises fail (its scripts refused); the first loss is owed.
  await redis.acl('SETUSER', 'gen-node-a', '-eval', '-evalsha');
  await a.lostWrites('first loss');
  // The operator raises; A reads it, and its retry of the owed raise fails again.
  const operator = await raiseGeneration(redis, keys);
  await assert.rejects(a.refresh(), /Redis is unavailable/, 'the owed raise retried, refused again');
  assert.equal(a.current, operator.after, 'the operator\'s raise read');
  // A second loss, seen holding the operator's raise: its raise fails too.
  await a.lostWrites('second loss');
  await redis.acl('SETUSER', 'gen-node-a', '+eval', '+evalsha');
  await a.refresh();
  assert.ok(a.current > operator.after, `the second loss raised past the operator's raise (${operator.after}): ${a.current}`);
  assert.equal(Number(await redis.get(keys.inboxGeneration())), a.current);
});
