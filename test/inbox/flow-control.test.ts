/**
 * Flow control of pipelined calls (src/inbox/tick-pipeline.ts): a burst far larger than
 * the bound goes out a window at a time, so a command's timeout measures Redis and not
 * the backlog behind it: 20,000 appends with a 300 ms command timeout all succeed (sent
 * at once, the last ones timed out while Redis was still appending the first). With
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
/** Slack for scheduling and the event loop on a loaded test machine. */
const MARGIN_MS = 700;

let server: RedisServer;
let redis: Redis;

before(async () => {
  server = await RedisServer.start({ args: ['--enable-debug-command', 'yes'] });
  redis = await createRedis({ url: server.url, commandTimeoutMs: COMMAND_TIMEOUT_MS });
});

after(async () => {
  redis?.disconnect();
  await server?.destroy();
});

/** A pipeline of INCRs of one key, answering the new value. */
function incrPipeline(maxBatch: number, maxInFlight: number): TickPipeline<string, number> {
  return new TickPipeline<string, number>(redis, {
    command: 'incr',
    send: (client, key) => {
      const command = new Command('incr', [key], { replyEncoding: 'utf8' });
      void client.sendCommand(command);
      return command.promise as Promise<unknown>;
    },
    reply: (raw) => Number(raw),
    error: toRedisError,
  }, maxBatch, maxInFlight);
}

test('20,000 appends issued at once with a 300 ms command timeout: every one succeeds, seqs 1..20,000 in order', async () => {
  const inbox = new Inbox(redis, { prefix: 'flow:', cap: 100_000 });
  const n = 20_000;
  const appends = Array.from({ length: n }, (_, i) => inbox.append('burst', encodeMsgId({ partition: 0, kind: MsgKind.user, counter: i + 1 }), MsgKind.user));
  const results = await Promise.allSettled(appends);
  const failed = results.filter((r) => r.status === 'rejected');
  assert.equal(failed.length, 0, `${failed.length} failed, first: ${String((failed[0] as PromiseRejectedResult | undefined)?.reason)}`);
  assert.deepEqual(results.map((r) => (r.status === 'fulfilled' ? r.value.seq : 0)), Array.from({ length: n }, (_, i) => i + 1));
});

test('never more than maxInFlight commands in flight; the rest wait in order and all are answered', async () => {
  const pipeline = incrPipeline(50, 120);
  let most = 0;
  const calls = Array.from({ length: 3000 }, () => pipeline.call('flow:counter').then((v) => {
    most = Math.max(most, pipeline.load.inFlight + 1);
    return v;
  }));
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 3000 }, 'nothing is sent before the tick ends');
  const values = await Promise.all(calls);
  assert.deepEqual(values, Array.from({ length: 3000 }, (_, i) => i + 1), 'answered in the order called');
  assert.ok(most <= 120 && most >= 50, `at most ${most} in flight`);
  assert.deepEqual(pipeline.load, { inFlight: 0, waiting: 0 });
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
