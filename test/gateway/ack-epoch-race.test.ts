/**
 * `POST /v1/me/ack` when the inbox gets a new epoch between the route's read of the
 * epoch and its ack (a generation raise's rotation at an append, a delivery that saw
 * less, another device's `last_seq` above the latest): an ack with `epoch` is answered
 * `409 CONFLICT`, as when the read itself finds another epoch, never `200` with the new
 * epoch's cursor (the chaos walk's F1: `cursor: 0` for a device at 73 under the epoch
 * it sent); one without is a 409 too, never taken under the new epoch (docs/api.md "Client routes",
 * ack-7.lua step 1).
 *
 * The rotation is put between the two deterministically with CLIENT PAUSE WRITE: the
 * range script (no-writes) runs through it, the rotation and then the ack wait, and
 * Redis runs them in that order when unpaused; MONITOR confirms that order as Redis ran
 * it. Private redis-server, real HTTP.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, PixiuClient } from '../harness/pixiu-server.js';
import { holdsOnPause, waitUntil } from '../harness/checks.js';
import { monitorRedis, type MonitoredCommand } from '../harness/redis-monitor.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY } from './gateway-fixture.js';
import { postMany, startDelivery } from './delivery-fixture.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { scriptSha } from '../../src/redis/scripts.js';

/*
 * Held scripts are looked for by connection, not counted over all of them: the node's
 * renewals hold write scripts of their own every few seconds (`pixiu:renewals`), and one
 * of those could be taken for the ack's. CLIENT LIST names no script, so which one was
 * held is checked after, from MONITOR (ackAcrossRotation).
 */
/** The test's Inbox connection (harness/checks.ts openInbox), which makes the rotation. */
const TEST_CONNECTION = 'pixiu:test';
/** The node's command connection (src/service/redis-start.ts), on which the route reads and acks. */
const NODE_CONNECTION = 'pixiu';

/** The inbox scripts the race is made of, by SHA as EVALSHA names them. */
const RACE_SCRIPTS = new Map([
  [scriptSha(INBOX_SCRIPTS.range), 'range'], [scriptSha(INBOX_SCRIPTS.rotate), 'rotate'], [scriptSha(INBOX_SCRIPTS.ack), 'ack'],
]);

/**
 * Runs `ack` with a rotation of `user`'s inbox from `epoch` landing between the route's
 * read and its ack script, and asserts from MONITOR that Redis ran exactly those three
 * scripts on `user`'s keys, in that order.
 * @returns the ack's answer and the new epoch
 */
async function ackAcrossRotation<T>(url: string, inbox: Inbox, user: string, epoch: string, ack: () => Promise<T>): Promise<{ answer: T; rotated: string | null }> {
  const probe = new Redis(url);
  const watch = cleanupList();
  // The race's scripts on this user's keys (KEYS[1] holds `{user}`), as Redis runs them.
  const ran: string[] = [];
  const raceScript = (args: MonitoredCommand): string | undefined =>
    (args[0]?.toLowerCase() === 'evalsha' && args[3]?.includes(`{${user}}`) ? RACE_SCRIPTS.get(args[1] ?? '') : undefined);
  try {
    await monitorRedis(url, watch, (args) => { const script = raceScript(args); if (script !== undefined) ran.push(script); });
    await probe.call('CLIENT', 'PAUSE', '10000', 'WRITE');
    const rotation = inbox.rotateEpoch(user, epoch);
    await waitUntil(`the rotation waits on the pause (a script held on ${TEST_CONNECTION})`, () => holdsOnPause(probe, TEST_CONNECTION, 'evalsha'), 5000, 5);
    const answer = ack();
    await waitUntil(`the ack waits behind it (a script held on ${NODE_CONNECTION}, the route's connection)`, () => holdsOnPause(probe, NODE_CONNECTION, 'evalsha'), 5000, 5);
    await probe.call('CLIENT', 'UNPAUSE');
    const result = { answer: await answer, rotated: await rotation };
    // MONITOR's lines may trail the answers by a moment: up to 5 s for the three, then the
    // order as it is (a route that never reached its ack script shows as one missing).
    for (const deadline = performance.now() + 5000; ran.length < 3 && performance.now() < deadline;) await delay(5);
    assert.deepEqual(ran, ['range', 'rotate', 'ack'], 'the route\'s read, then the rotation, then the route\'s ack script, as Redis ran them');
    return result;
  } finally {
    await probe.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    probe.disconnect();
    await watch.run();
  }
}

test('an ack whose inbox gets a new epoch between the route\'s epoch read and its write: 409, with the epoch sent or without (chaos walk F1)', async (t) => {
  // One step of `t`, run in reverse: the gateway and the inbox client close before their
  // Redis is destroyed (`t.after` runs FIFO; see startInProcessAlone).
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw, inbox } = await startDelivery(steps, 'ackrace', { redisUrl: own.url });
  const user = 'ada';
  await postMany(gw.client, user, 3);
  const me = new PixiuClient(gw.url, await testToken(JWT_KEY, user));
  const page = await me.get('/v1/me/messages?after_seq=0');
  const epoch = (page.body as { epoch: string }).epoch;
  const first = await me.post('/v1/me/ack', { device: 'd1', seq: 3, epoch });
  assert.deepEqual(first.body, { device: 'd1', cursor: 3 });

  // A cursor probe (seq 0) under the epoch it read, as the rotation comes.
  const probe = await ackAcrossRotation(own.url, inbox, user, epoch, () => me.post('/v1/me/ack', { device: 'd1', seq: 0, epoch }));
  assert.ok(probe.rotated !== null && probe.rotated !== epoch);
  assert.equal(probe.answer.status, 409, `not the inbox's epoch any more: ${probe.answer.text}`);
  assert.equal((probe.answer.body as { error: { code: string } }).error.code, 'CONFLICT');
  assert.deepEqual(await inbox.deviceCursor(user, 'd1'), { seq: 3, epoch }, 'the cursor under the epoch sent is kept with it');

  // Without an epoch, a 409 too: the seq was read under the epoch before, and taken under the
  // new one it would skip that epoch's first messages with no reset (the whole-change review's L1).
  const rotated = probe.rotated;
  const bare = await ackAcrossRotation(own.url, inbox, user, rotated, () => me.post('/v1/me/ack', { device: 'd2', seq: 2 }));
  assert.ok(bare.rotated !== null && bare.rotated !== rotated);
  assert.equal(bare.answer.status, 409, bare.answer.text);
  assert.match((bare.answer.body as { error: { message: string } }).error.message, /^the inbox's epoch changed during the ack \(it was \S+\): read GET \/v1\/me\/messages again$/);
  assert.notDeepEqual(await inbox.deviceCursor(user, 'd2'), { seq: 2, epoch: bare.rotated }, 'no cursor of the new epoch moved');
});
