/**
 * Flow control of pipelined calls (src/inbox/tick-pipeline.ts): a burst far larger than
 * the bound goes out a window at a time, so a command's timeout measures Redis and not
 * the backlog behind it: 40,000 appends with a command timeout of three windows' time
 * (300 ms at least; measured first, so that a loaded machine moves both) all succeed
 * (sent at once without the bound, the last ones timed out while Redis was still
 * appending the first: on this 2-core machine Redis takes 1 – 1.7 s for them; a window
 * of 2,000 takes 50 – 100 ms; at a load of 10 a fixed 600 ms failed 27,573). With
 * Redis hung, the calls still waiting fail as soon as one sent times out, not one
 * timeout after another. A real private redis-server; DEBUG SLEEP stands in for a hung one.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { Command, type Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { createRedis, toRedisError } from '../../src/redis/client.js';
import { isPixiuError } from '../../src/errors.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { TickPipeline } from '../../src/inbox/tick-pipeline.js';

const COMMAND_TIMEOUT_MS = 300;
/** The burst test's least command timeout, ms: shorter than the whole burst takes Redis, far longer than a window. */
const BURST_TIMEOUT_MS = 300;
/** Appends in flight at once: the append pipeline's bound (src/inbox/inbox.ts, 4 × MAX_APPEND_BATCH of 500). */
const WINDOW = 2000;
/** Slack for scheduling and the event loop on a loaded test machine. */
const MARGIN_MS = 700;

let server: RedisServer;
let redis: Redis;
/** For the tests that are not about timeouts: a loaded machine must not fail them. */
let patient: Redis;

before(async () => {
  server = await RedisServer.start({ args: ['--enable-debug-command', 'yes'] });
  redis = await createRedis({ url: server.url, commandTimeoutMs: COMMAND_TIMEOUT_MS });
  patient = await createRedis({ url: server.url, commandTimeoutMs: 10_000 });
});

after(async () => {
  redis?.disconnect();
  patient?.disconnect();
  await server?.destroy();
});

/** A pipeline of INCRs of one key, answering the new value. */
function incrPipeline(maxBatch: number, maxInFlight: number, client = redis, breaksFlow?: () => boolean): TickPipeline<string, number> {
  return new TickPipeline<string, number>(client, {
    send: (client, key) => {
      const command = new Command('incr', [key], { replyEncoding: 'utf8' });
      void client.sendCommand(command);
      return command.promise as Promise<unknown>;
    },
    reply: (raw) => Number(raw),
    error: toRedisError,
    ...(breaksFlow === undefined ? {} : { breaksFlow }),
  }, maxBatch, maxInFlight);
}

test('40,000 appends issued at once, with a command timeout of a few windows\' time: every one succeeds, seqs 1..40,000 in order', async (t) => {
  // How long a window of appends takes Redis now, on this machine under its present load.
  const probe = new Inbox(patient, { prefix: 'flow-probe:', cap: 100_000 });
  const probeStart = performance.now();
  await Promise.all(Array.from({ length: WINDOW }, (_, i) => probe.append('probe', encodeMsgId({ partition: 0, kind: MsgKind.user, counter: i + 1 }), MsgKind.user)));
  const windowMs = performance.now() - probeStart;
  // Three windows' time: the burst of twenty windows takes Redis about nine (it
  // pipelines more at once), so without the bound its last commands would wait three
  // times past it; with it each waits about one.
  const timeoutMs = Math.round(Math.min(10_000, Math.max(BURST_TIMEOUT_MS, 3 * windowMs)));
  const client = await createRedis({ url: server.url, commandTimeoutMs: timeoutMs });
  t.after(() => client.disconnect());
  const inbox = new Inbox(client, { prefix: 'flow:', cap: 100_000 });
  const n = 20 * WINDOW;
  const appends = Array.from({ length: n }, (_, i) => inbox.append('burst', encodeMsgId({ partition: 0, kind: MsgKind.user, counter: i + 1 }), MsgKind.user));
  const results = await Promise.allSettled(appends);
  const failed = results.filter((r) => r.status === 'rejected');
  assert.equal(failed.length, 0, `${failed.length} failed (a window took ${Math.round(windowMs)} ms, timeout ${timeoutMs} ms), first: ${String((failed[0] as PromiseRejectedResult | undefined)?.reason)}`);
  assert.deepEqual(results.map((r) => (r.status === 'fulfilled' ? r.value.seq : 0)), Array.from({ length: n }, (_, i) => i + 1));
});

test('never more than maxInFlight commands in flight; the rest wait in order and all are answered', async () => {
  const pipeline = incrPipeline(50, 120, patient);
  let most = 0;
  const calls = Array.from({ length: 3000 }, () => pipeline.call('flow:counter').then((v) => {
    most = Math.max(most, pipeline.load.inFlight + 1);
    return v;
  }));
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 3000 }, 'nothing is sent before the tick ends');
  // This immediate runs right after the pipeline's own, before any reply is read.
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(pipeline.load, { inFlight: 120, waiting: 2880 }, 'the first writes fill the window');
  const values = await Promise.all(calls);
  assert.deepEqual(values, Array.from({ length: 3000 }, (_, i) => i + 1), 'answered in the order called');
  assert.ok(most <= 120, `at most ${most} in flight`);
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 0 });
});

test('by default the bound is four writes of maxBatch: the append pipeline\'s window of 2,000 (4 × 500)', async () => {
  const pipeline = new TickPipeline<string, number>(patient, {
    send: (client, key) => client.incr(key),
    reply: (raw) => Number(raw),
    error: toRedisError,
  }, 50);
  const calls = Array.from({ length: 500 }, () => pipeline.call('flow:default-bound'));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(pipeline.load, { inFlight: 200, waiting: 300 });
  assert.deepEqual((await Promise.all(calls)).at(-1), 500);
});

test('Redis hung: the calls waiting behind the bound fail UNAVAILABLE as soon as a sent one times out', async () => {
  const pipeline = incrPipeline(10, 20);
  // DEBUG SLEEP reaches Redis before the pipeline's first write (it is sent at once).
  const sleeping = redis.call('DEBUG', 'SLEEP', '2').catch(() => 'timed out');
  const start = performance.now();
  const settled = await Promise.allSettled(Array.from({ length: 2000 }, () => pipeline.call('flow:hung')));
  const elapsed = performance.now() - start;
  assert.ok(settled.every((s) => s.status === 'rejected' && isPixiuError(s.reason, 'UNAVAILABLE')), 'every call UNAVAILABLE');
  // One timeout, not one per window of 20 (100 of them: 30 s).
  assert.ok(elapsed < COMMAND_TIMEOUT_MS + MARGIN_MS, `settled after ${Math.round(elapsed)} ms`);
  await sleeping;
});

test('callEach: one call of many commands, built only as they are sent, bounded and answered in order among single calls', async () => {
  const pipeline = incrPipeline(50, 120, patient);
  let built = 0;
  let most = 0;
  const first = pipeline.call('flow:each');
  const each = pipeline.callEach(3000, (i) => {
    built += 1;
    most = Math.max(most, pipeline.load.inFlight + 1);
    // The one bad command fails alone, unsent.
    if (i === 1500) throw new Error('no key for 1500');
    return 'flow:each';
  });
  const last = pipeline.call('flow:each');
  assert.equal(built, 0, 'nothing is built when the call is queued');
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 3002 }, 'waiting counts commands, not calls');
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(built <= 120, `${built} built after the first write: no more than the bound`);
  const results = await each;
  assert.equal(await first, 1);
  assert.equal(results.length, 3000);
  assert.deepEqual(results[1500], { status: 'rejected', reason: new Error('no key for 1500') });
  const values = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
  // In order after the first call; 1500 sent nothing, so the rest are one lower.
  assert.deepEqual(values, Array.from({ length: 2999 }, (_, i) => i + 2));
  assert.equal(await last, 3001);
  assert.ok(most <= 120, `at most ${most} in flight`);
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 0 });
  assert.deepEqual(await pipeline.callEach(0, () => 'flow:each'), [], 'no commands: answered at once');
});

test('callEach with Redis hung: the commands not yet sent fail UNAVAILABLE as soon as a sent one times out', async () => {
  const pipeline = incrPipeline(10, 20);
  const sleeping = redis.call('DEBUG', 'SLEEP', '2').catch(() => 'timed out');
  const start = performance.now();
  const results = await pipeline.callEach(2000, () => 'flow:hung-each');
  const elapsed = performance.now() - start;
  assert.ok(results.every((s) => s.status === 'rejected' && isPixiuError(s.reason, 'UNAVAILABLE')), 'every command UNAVAILABLE');
  assert.ok(elapsed < COMMAND_TIMEOUT_MS + MARGIN_MS, `settled after ${Math.round(elapsed)} ms`);
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 0 });
  await sleeping;
});

test('Inbox.appendEach: 5,000 recipients in order behind one queued call, a bad uid failing alone', async () => {
  const inbox = new Inbox(patient, { prefix: 'flow-each:', cap: 100 });
  const users = Array.from({ length: 5000 }, (_, i) => (i === 7 ? 'x'.repeat(300) : `member-${i}`));
  const id = encodeMsgId({ partition: 0, kind: MsgKind.room, counter: 1 });
  const results = await inbox.appendEach(users, id, MsgKind.room, { room: 'lobby' });
  assert.equal(results.length, 5000);
  const bad = results[7];
  assert.ok(bad?.status === 'rejected' && isPixiuError(bad.reason, 'INVALID_REQUEST'), 'the over-long uid fails INVALID_REQUEST');
  assert.ok(results.every((r, i) => i === 7 || (r.status === 'fulfilled' && r.value.seq === 1 && !r.value.duplicate)));
  const page = await inbox.range('member-4999', 0, 10);
  assert.deepEqual(page.entries, [{ seq: 1, id, kind: MsgKind.room, room: 'lobby' }]);
  // Again: every one a duplicate, nothing appended twice.
  const again = await inbox.appendEach(users, id, MsgKind.room, { room: 'lobby' });
  assert.ok(again.every((r, i) => i === 7 || (r.status === 'fulfilled' && r.value.duplicate && r.value.seq === 1)));
  await assert.rejects(inbox.appendEach(users, 'not-an-id', MsgKind.room), (e: unknown) => isPixiuError(e, 'INVALID_REQUEST'));
});

test('flows take turns: a call queued behind 20,000 commands of another flow goes out in the first write; each flow keeps its order', async () => {
  const pipeline = incrPipeline(50, 120, patient);
  const bulk = {};
  let built = 0;
  const big = pipeline.callEach(20_000, () => {
    built += 1;
    return 'flow:turns-a';
  }, bulk);
  const later = pipeline.call('flow:turns-a', bulk);
  let builtWhenAnswered = -1;
  const other = pipeline.call('flow:turns-b', {}).then((v) => {
    builtWhenAnswered = built;
    return v;
  });
  const shared = [pipeline.call('flow:turns-c'), pipeline.call('flow:turns-c')];
  assert.equal(await other, 1);
  assert.ok(builtWhenAnswered <= 120, `answered after ${builtWhenAnswered} of the other flow's commands were built: it did not wait for them`);
  assert.deepEqual(await Promise.all(shared), [1, 2], 'calls of the shared flow in order');
  const values = (await big).map((r) => (r.status === 'fulfilled' ? r.value : 0));
  assert.deepEqual(values, Array.from({ length: 20_000 }, (_, i) => i + 1), 'one flow\'s commands in the order queued');
  assert.equal(await later, 20_001, 'and its next call after them');
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 0 });
});

// A request whose command failed for want of Redis fails its later commands unsent
// (tick-pipeline.ts #broken), so nothing of it goes on after the failure: docs/api.md,
// a batch item that fails 503 fails the later ones and the retry keeps batch order.
test('a flow whose waiting command failed on another flow\'s timeout is broken too: its next call fails unsent', async () => {
  const pipeline = incrPipeline(10, 10);
  const other = {};
  const batch = {};
  // Redis hangs 800 ms: the other request's 10 commands fill the window and time out.
  void patient.call('DEBUG', 'SLEEP', '0.8');
  // A fixed wait: a sleeping Redis answers no one, so nothing can say it has begun (50 ms of its 800).
  await new Promise((r) => setTimeout(r, 50));
  const others = Array.from({ length: 10 }, () => pipeline.call('rv:other', other).catch((e: unknown) => e));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(pipeline.load, { inFlight: 10, waiting: 0 }, 'the window is full');
  // The batch's first item: waits behind them, fails with their timeout.
  const firstCall = pipeline.call('rv:alice', batch).then(() => 'ok', (e: unknown) => (isPixiuError(e, 'UNAVAILABLE') ? 'UNAVAILABLE' : String(e)));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(pipeline.load, { inFlight: 10, waiting: 1 }, 'the batch\'s call waits');
  const first = await firstCall;
  await Promise.all(others);
  assert.equal(first, 'UNAVAILABLE', 'the batch item failed 503 (a timeout of the other request)');
  // Redis answers again (a PING queued behind the sleep comes back); the batch's later
  // item to the same user.
  await patient.ping();
  const later = await pipeline.call('rv:alice', batch).then((v) => `appended (${v})`, (e: unknown) => `failed: ${String(e)}`);
  assert.match(later, /failed/, `the batch's later call after its failed one: ${later}`);
});

/** A pipeline of INCRs as {@link incrPipeline}'s, whose failures all break their flow (as a dropped connection's do). */
function breakingIncrPipeline(maxBatch: number, maxInFlight: number): TickPipeline<string, number> {
  return incrPipeline(maxBatch, maxInFlight, patient, () => true);
}

/** What each settled result holds: its value, or 'failed'. */
function outcomes(results: PromiseSettledResult<number>[]): (number | string)[] {
  return results.map((r) => (r.status === 'fulfilled' ? r.value : 'failed'));
}

test('a failure that breaks its flow fails the flow\'s waiting commands unsent; the other flows keep their turns and the waiting count stays true', async () => {
  await patient.set('flow:not-a-number', 'x');
  // One command in flight at a time: the others wait in the ring.
  const pipeline = breakingIncrPipeline(1, 1);
  let loadWhenBroken: { inFlight: number; waiting: number } | undefined;
  const a = pipeline.callEach(3, (i) => (i === 0 ? 'flow:not-a-number' : 'flow:brk-a'), {}).then((r) => {
    loadWhenBroken = pipeline.load;
    return r;
  });
  const b = pipeline.callEach(2, () => 'flow:brk', {});
  const c = pipeline.callEach(2, () => 'flow:brk', {});
  assert.deepEqual(outcomes(await a), ['failed', 'failed', 'failed'], 'its first failed (an error reply), the two after it unsent');
  assert.deepEqual(loadWhenBroken, { inFlight: 0, waiting: 4 }, 'the other flows\' four commands wait');
  // b's turn came after a's: it goes first once a is gone, then c, in turns.
  assert.deepEqual([outcomes(await b), outcomes(await c)], [[1, 3], [2, 4]]);
  assert.equal(await patient.get('flow:brk-a'), null, 'nothing of the broken flow was sent after its failure');
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 0 });
});

test('an error reply fails its call alone: by default it breaks no flow, and the shared flow is never broken', async () => {
  await patient.set('flow:still-not-a-number', 'x');
  const byDefault = incrPipeline(50, 120, patient);
  const flow = {};
  await assert.rejects(byDefault.call('flow:still-not-a-number', flow));
  assert.equal(await byDefault.call('flow:after-reply-error', flow), 1, 'the flow goes on after an error reply');
  const breaking = breakingIncrPipeline(50, 120);
  await assert.rejects(breaking.call('flow:still-not-a-number'));
  assert.equal(await breaking.call('flow:shared-after-failure'), 1, 'the shared flow goes on after a failure that breaks flows');
  const broken = {};
  await assert.rejects(breaking.call('flow:still-not-a-number', broken));
  await assert.rejects(breaking.call('flow:shared-after-failure', broken), 'a flow of its own is broken by it');
});

test('a failure that breaks flows, in the shared flow, leaves the shared flow\'s waiting commands to go on', async () => {
  await patient.set('flow:shared-nan', 'x');
  // One command in flight at a time: the two after the failing one wait in the shared flow.
  const pipeline = breakingIncrPipeline(1, 1);
  const calls = [pipeline.call('flow:shared-nan'), pipeline.call('flow:shared-waiting'), pipeline.call('flow:shared-waiting')];
  assert.deepEqual(outcomes(await Promise.allSettled(calls)), ['failed', 1, 2]);
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 0 });
});

test('a reply that call.reply cannot read rejects its call with what reply threw, not as a Redis failure', async () => {
  const unreadable = new Error('unexpected reply');
  const pipeline = new TickPipeline<string, number>(patient, {
    send: (client, key) => client.incr(key),
    reply: () => {
      throw unreadable;
    },
    error: toRedisError,
  }, 10);
  await assert.rejects(pipeline.call('flow:unreadable'), (err: unknown) => err === unreadable);
  assert.equal(await patient.get('flow:unreadable'), '1', 'the command did run');
});
