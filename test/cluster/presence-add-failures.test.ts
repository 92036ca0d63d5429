/**
 * Which failed presence adds a node settles (src/cluster/presence.ts `add`,
 * presence-settle.ts; src/redis/client.ts `mayHaveRun`): only one Redis may have run
 * — a command timeout, a connection lost after the add was written. Before, every
 * failure was settled, each kept pending (`pixiu_presence_removals_pending`) and
 * retried every second for an entry lifetime (55 s by default): during an outage, with
 * the offline queue off, every client's every retried handshake added one, and a
 * reconnect brought a burst of settlings; a bad uid's failed every retry
 * (review-presence F4). A private redis-server; Presence over the service's client.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { Presence } from '../../src/cluster/presence.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { PixiuError } from '../../src/errors.js';
import { fileRedis } from '../harness/file-redis.js';
import { waitUntil } from '../harness/checks.js';
import type { RedisServer } from '../harness/redis-server.js';

const keys = new Keys('addfail:');
/** Short: a paused Redis times the add out quickly. */
const COMMAND_TIMEOUT_MS = 300;
let server: RedisServer;
let redis: Redis;
let probe: Redis;

fileRedis(async ({ redis: started, cleanup }) => {
  server = started;
  redis = await createRedis({ url: server.url, commandTimeoutMs: COMMAND_TIMEOUT_MS });
  cleanup.after(() => redis.disconnect());
  probe = await createRedis({ url: server.url, commandTimeoutMs: 5_000 });
  cleanup.after(() => probe.disconnect());
}, { aof: true });

/** Presence of one node (on `client`); every node counts as registered; the connections its settlings answer go to `closed`. */
function presence(closed: string[] = [], client: Redis = redis): Presence {
  return new Presence(client, keys, {
    node: 'n1', ttlMs: 60_000, maxPerUser: 5, liveNodes: async (nodes) => new Set(nodes),
    onUnansweredReplaced: (_user, replaced) => closed.push(...replaced.map((r) => r.conn)),
  });
}

/** Runs `add` and answers its rejection. */
async function rejection(add: Promise<unknown>): Promise<PixiuError> {
  const err = await add.then(() => assert.fail('the add succeeded'), (e: unknown) => e);
  assert.ok(err instanceof PixiuError, String(err));
  return err;
}

test('an add Redis answered with an error, or that failed before any Redis call, is not settled', async (t) => {
  const p = presence();
  t.after(() => p.stop());
  // The script's own refusal (an empty device), before it writes.
  assert.equal((await rejection(p.add('u-invalid', 'c1', '', 1))).code, 'INVALID_REQUEST');
  // A bad uid (empty): no key can be built.
  assert.equal((await rejection(p.add('', 'c2', 'phone', 1))).code, 'INVALID_REQUEST');
  // Redis refusing the script whole (over maxmemory: it has no allow-oom flag).
  t.after(() => probe.config('SET', 'maxmemory', '0'));
  await probe.config('SET', 'maxmemory', '1');
  assert.equal((await rejection(p.add('u-full', 'c3', 'phone', 1))).code, 'UNAVAILABLE');
  await probe.config('SET', 'maxmemory', '0');
  assert.equal(p.pendingRemovals, 0, 'before: each settled; the bad uid\'s pending for the entry\'s lifetime, failing every retry');
});

test('an add refused unsent while the connection to Redis is down is not settled; one that timed out is, and its entry goes once Redis answers', { timeout: 30_000 }, async (t) => {
  const closed: string[] = [];
  const p = presence(closed);
  t.after(() => p.stop());
  await server.stop();
  try {
    await waitUntil('the client knows the connection is down', async () => redis.status !== 'ready', 5_000);
    const err = await rejection(p.add('u-down', 'c1', 'phone', 1));
    assert.equal(err.code, 'UNAVAILABLE');
    assert.equal(p.pendingRemovals, 0, `before: 1 (${String((err.cause as Error).message)})`);
  } finally {
    await server.restart();
  }
  await waitUntil('the clients are back', async () => redis.status === 'ready' && probe.status === 'ready', 15_000);

  // Redis stalled past the command timeout: the add runs once Redis answers again,
  // replacing c0, and is settled: its entry deleted, c0 answered to be closed.
  await p.add('u-slow', 'c0', 'phone', 1);
  await probe.client('PAUSE', 1_000, 'ALL');
  assert.equal((await rejection(p.add('u-slow', 'c2', 'phone', 2))).code, 'UNAVAILABLE');
  assert.equal(p.pendingRemovals, 1);
  await waitUntil('the add is settled', async () => p.pendingRemovals === 0, 10_000);
  assert.deepEqual(closed, ['c0']);
  assert.deepEqual(await probe.hkeys(keys.conns('u-slow')), [], 'the orphan entry is gone, and c0\'s');
});

test('an add settled while Redis stalls past several retries hands what it replaced over once, not once per settling in flight (walk33 L-dup-log)', { timeout: 30_000 }, async (t) => {
  // The default command timeout, past the retries' second: the timer's settling and the
  // one sent before the device's retry (its add on this node, Retry-After later) are
  // both in flight when Redis answers, each answering c0 alike.
  const slow = await createRedis({ url: server.url, commandTimeoutMs: 2_000 });
  t.after(() => slow.disconnect());
  const closed: string[] = [];
  const p = presence(closed, slow);
  t.after(() => p.stop());
  await p.add('u-long', 'c0', 'phone', 1);
  await probe.client('PAUSE', 4_500, 'ALL');
  assert.equal((await rejection(p.add('u-long', 'c2', 'phone', 2))).code, 'UNAVAILABLE');
  // The device's retry a Retry-After (1 s) later, as a real one's: a time of the scenario,
  // which puts the timer's settling in flight too (1 s inside the 4.5 s pause, on any load).
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  await p.add('u-long', 'c3', 'phone', 3);
  await waitUntil('the add is settled', async () => p.pendingRemovals === 0, 15_000);
  // Every command `slow` sent has its reply once a PING sent after them is answered: Redis
  // answers one connection's commands in order, one whose caller timed out too (ioredis
  // reads its reply and drops it). A turn of the event loop then lets the replies' handlers
  // run: the other settlings in flight have answered, and handed over what they found.
  // (Not ioredis's private `commandQueue`, as before.)
  assert.equal(await slow.ping(), 'PONG');
  await setImmediate();
  assert.deepEqual(closed, ['c0'], 'before: c0 handed over (and logged by the gateway) once per settling in flight');
  assert.deepEqual(await probe.hkeys(keys.conns('u-long')), ['c3']);
});
