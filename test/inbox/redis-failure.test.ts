import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { createRedis, transaction } from '../../src/redis/client.js';
import { isPixiuError } from '../../src/errors.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { requireRedisVersion } from '../../src/redis/version-check.js';
import { countSocketWrites, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';

/** A short command timeout, so a lost reply is noticed quickly. */
const COMMAND_TIMEOUT_MS = 300;
/** Slack for scheduling and the event loop on a loaded test machine. */
const MARGIN_MS = 700;
/** The command timeout of the clients whose cases are not about timeouts. */
const UNTIMED_MS = 10_000;
/** How long Redis may take to come back and the client to reconnect. */
const RECOVERY_BOUND_MS = 10_000;

let server: RedisServer;
let redis: Redis;
let inbox: Inbox;

before(async () => {
  // DEBUG SLEEP stands in for a Redis that is up but not answering.
  server = await RedisServer.start({ args: ['--enable-debug-command', 'yes'] });
  redis = await createRedis({ url: server.url, commandTimeoutMs: COMMAND_TIMEOUT_MS });
  inbox = new Inbox(redis, { prefix: 'px:', cap: 1000 });
});

after(async () => {
  redis?.disconnect();
  await server?.destroy();
});

function msgId(n: number): string {
  return encodeMsgId({ partition: 0, kind: MsgKind.user, counter: n });
}

function unavailable(err: unknown): boolean {
  return isPixiuError(err, 'UNAVAILABLE');
}

/** Runs `fn` and returns how long it took to settle, asserting it failed UNAVAILABLE. */
async function failsUnavailable(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await assert.rejects(fn(), unavailable);
  return performance.now() - start;
}

/**
 * Resolves on the client's next `ready` event, or rejects after `ms`. Not `events.once`:
 * it rejects on the `error` events a client emits while it retries a server still down
 * (a failed reconnect before the restart had bound its port failed a test under load).
 */
function nextReady(ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new Error(`no ready event within ${ms} ms`));
    }, ms);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}

/**
 * Retries `fn` until it succeeds, waiting for the client's `ready` event between tries
 * while it is reconnecting (no sleeping), within {@link RECOVERY_BOUND_MS}.
 */
async function whenWorking<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + RECOVERY_BOUND_MS;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!unavailable(err) || performance.now() > deadline) throw err;
      if (redis.status !== 'ready') {
        await nextReady(Math.max(1, Math.ceil(deadline - performance.now())));
      }
    }
  }
}

test('with Redis SIGKILLed calls fail fast as UNAVAILABLE, and work again after restart on the same client', async () => {
  const uid = 'crash';
  // Retried as the appends after the restart are: the file's first call on a loaded
  // machine can pass the 300 ms timeout (a clean-clone CI run, 442 ms), and an append
  // of one MsgID is idempotent.
  const before = await whenWorking(() => inbox.append(uid, msgId(1), MsgKind.user));
  assert.equal(before.seq, 1);

  // Calls already issued when Redis dies settle too: done or UNAVAILABLE, never hanging.
  const start = performance.now();
  const inFlight = Array.from({ length: 50 }, (_, i) => inbox.append(uid, msgId(100 + i), MsgKind.user));
  await server.kill();
  const settled = await Promise.allSettled(inFlight);
  assert.ok(performance.now() - start < COMMAND_TIMEOUT_MS + MARGIN_MS, 'in-flight calls settle within the bound');
  for (const s of settled) if (s.status === 'rejected') assert.ok(unavailable(s.reason), String(s.reason));

  const bound = COMMAND_TIMEOUT_MS + MARGIN_MS;
  const elapsed = [
    await failsUnavailable(() => inbox.append(uid, msgId(2), MsgKind.user)),
    await failsUnavailable(() => inbox.range(uid, 0, 10)),
    await failsUnavailable(() => inbox.ack(uid, 'phone', 1)),
    await failsUnavailable(() => inbox.cursors(uid)),
  ];
  for (const ms of elapsed) assert.ok(ms < bound, `failed after ${Math.round(ms)} ms, bound ${bound} ms`);

  await server.restart();
  const afterRestart = await whenWorking(() => inbox.append(uid, msgId(3), MsgKind.user));
  // The server ran without persistence, so it came back empty: a new inbox.
  assert.equal(afterRestart.seq, 1);
  assert.notEqual(afterRestart.epoch, before.epoch);
  // Retried as the append was: a client just reconnected, on a loaded machine, can
  // still let one call pass the 300 ms timeout (both calls are idempotent).
  assert.equal((await whenWorking(() => inbox.range(uid, 0, 10))).latestSeq, 1);
  assert.equal(await whenWorking(() => inbox.ack(uid, 'phone', 1)), 1);
});

test('a Redis that stops answering makes a call fail as UNAVAILABLE within the command timeout', async () => {
  const uid = 'stalled';
  await whenWorking(() => inbox.append(uid, msgId(1), MsgKind.user));
  // Same tick, same auto-pipeline: DEBUG SLEEP reaches Redis first, the append waits behind it.
  const sleeping = redis.call('DEBUG', 'SLEEP', '1').catch(() => 'timed out');
  const elapsed = await failsUnavailable(() => inbox.append(uid, msgId(2), MsgKind.user));
  assert.ok(elapsed < COMMAND_TIMEOUT_MS + MARGIN_MS, `failed after ${Math.round(elapsed)} ms`);
  await sleeping;
  const next = await whenWorking(() => inbox.append(uid, msgId(3), MsgKind.user));
  // The timed-out append may still have run once Redis woke: idempotent either way.
  assert.ok(next.seq === 2 || next.seq === 3, `seq ${next.seq}`);
  const retried = await inbox.append(uid, msgId(2), MsgKind.user);
  assert.equal(retried.seq <= 3, true, 'retrying the timed-out append is harmless');
});

test('the scripts are loaded again as the client reconnects, ahead of its first call: no NOSCRIPT, no EVAL fallback', async () => {
  await whenWorking(() => inbox.append('reload', msgId(500), MsgKind.user));
  await server.kill();
  // Listening after the inbox registered its scripts: its own `ready` listener runs first.
  const ready = nextReady(RECOVERY_BOUND_MS);
  await server.restart();
  await ready;
  // Retried on a timeout (a loaded machine): an append of the same MsgID again answers its seq.
  const appended = await whenWorking(() => inbox.append('reload', msgId(501), MsgKind.user));
  assert.equal(appended.seq, 1, 'the restarted server came back empty');
  // A fresh server: these count only what this client sent since the restart.
  const stats = await redis.info('commandstats');
  assert.match(stats, /cmdstat_script\|load:calls=\d+/);
  assert.doesNotMatch(stats, /cmdstat_eval:/, 'no call fell back to EVAL');
  assert.doesNotMatch(await redis.info('errorstats'), /NOSCRIPT/);
});

test('a blocking client (XREAD BLOCK) has no command timeout: a read blocked past it answers when its block ends', async (t) => {
  const reader = await createRedis({ url: server.url, commandTimeoutMs: COMMAND_TIMEOUT_MS, blocking: true });
  t.after(() => reader.disconnect());
  assert.equal(await reader.xread('BLOCK', String(COMMAND_TIMEOUT_MS + 300), 'STREAMS', 'blocked-read', '$'), null);
});

test('each outage is logged once, however long the reconnects fail, and followed by "redis connection restored"', async (t) => {
  const { logger, lines } = capturingLogger();
  const watched = await createRedis({ url: server.url, commandTimeoutMs: COMMAND_TIMEOUT_MS, name: 'watched', logger });
  t.after(() => watched.disconnect());
  const said = (msg: string): number => lines.filter((l) => l.msg === msg).length;
  for (const outage of [1, 2]) {
    await server.kill();
    // Failed reconnects, all with one message: one line for them all.
    let failures = 0;
    const onError = (): void => { failures += 1; };
    watched.on('error', onError);
    await waitUntil(`outage ${outage}: two failed reconnects`, async () => failures >= 2);
    watched.off('error', onError);
    assert.equal(said('redis connection error'), outage, `outage ${outage}: ${JSON.stringify(lines)}`);
    // Not events.once: it rejects on an error event (a reconnect failing before the port is bound).
    const ready = new Promise((resolve) => watched.once('ready', resolve));
    await server.restart();
    await ready;
    assert.equal(said('redis connection restored'), outage, `outage ${outage}: ${JSON.stringify(lines)}`);
  }
  assert.deepEqual(lines.map((l) => l.redis), lines.map(() => 'watched'));
});

test('the start\'s version check names the Redis URL and the reason when INFO gets no answer in time', async () => {
  await whenWorking(() => inbox.append('version-check', msgId(900), MsgKind.user)); // connected again after the outages above
  // INFO is not auto-pipelined: it goes out once DEBUG SLEEP's pipeline is written (the
  // next turn of the event loop), on the same connection, so it waits behind it.
  const sleeping = redis.call('DEBUG', 'SLEEP', '1').catch(() => 'timed out');
  await new Promise((resolve) => setImmediate(resolve));
  await assert.rejects(requireRedisVersion(redis, 'redis://shown-url'), (err: Error) => {
    assert.equal(err.name, 'StartupError');
    assert.equal(err.message, 'cannot read INFO server of Redis at redis://shown-url: Command timed out');
    return true;
  });
  await sleeping;
});

test('a transaction answers its replies in order; one with a command Redis refused, or aborted by a WATCH, fails as UNAVAILABLE', async (t) => {
  await whenWorking(() => inbox.append('transaction', msgId(901), MsgKind.user));
  // Not a timeout case: a long command timeout, so a loaded machine does not fail it (a
  // clean-clone CI run in a slow spell: "Command timed out" at 300 ms).
  const own = await createRedis({ url: server.url, commandTimeoutMs: UNTIMED_MS });
  t.after(() => own.disconnect());
  await own.set('tx:string', 'x');
  assert.deepEqual(await transaction(() => own.multi().get('tx:string').exists('tx:string').exec()), ['x', 1]);
  await assert.rejects(transaction(() => own.multi().get('tx:string').hget('tx:string', 'f').exec()), unavailable, 'WRONGTYPE inside');
  await own.watch('tx:string');
  await redis.set('tx:string', 'changed');
  await assert.rejects(transaction(() => own.multi().get('tx:string').exec()), unavailable, 'aborted');
});

test('calls made in one tick leave in one socket write (auto-pipelining), not one each', async (t) => {
  const own = await createRedis({ url: server.url, commandTimeoutMs: UNTIMED_MS });
  t.after(() => own.disconnect());
  const writes = countSocketWrites(own);
  const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => own.get(`one-tick-${i}`)));
  assert.deepEqual(replies, Array.from({ length: 50 }, () => null));
  assert.equal(writes.count, 1);
});
