/**
 * What a node logs when it finds its own registration lapsed (src/cluster/node-registry.ts
 * `lapseLine`): when its renewal ran late because its event loop was held, it says so
 * and by how much, rather than the words of a Redis that lost the registration (a
 * FLUSHALL), which pointed an operator at Redis while the node itself had been held for
 * seconds by a request (a hostile-input newcomer's finding, low). A registry against a
 * private redis-server, renewing every 100 ms with a lifetime of 300 ms; its event
 * loop held by blocking the thread (`Atomics.wait`).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { NodeRegistry } from '../../src/cluster/node-registry.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const cleanup = cleanupList();
let redis: Redis;
const LATE = /^this node's registration renewal ran (\d+\.\d) s late \(its event loop was held: a long request or a stall\), so its registration lapsed; presence and shared settings written back$/;

before(async () => {
  const server = await RedisServer.start();
  cleanup.after(() => server.destroy());
  ({ redis } = await openInbox(cleanup, server.url));
});

after(() => cleanup.run());

/** A started registry for `node` (renewal 100 ms, lifetime 300 ms) whose warnings land in `lines`; `again` counts its re-registrations. */
async function startRegistry(node: string): Promise<{ registry: NodeRegistry; lines: LogLine[]; again: () => number }> {
  const { logger, lines } = capturingLogger();
  let again = 0;
  const registry = new NodeRegistry(redis, new Keys('lapse:'), { node, intervalMs: 100, ttlMs: 300, logger, onRegisteredAgain: () => { again += 1; } });
  await registry.start();
  cleanup.after(() => registry.stop());
  return { registry, lines, again: () => again };
}

/** Waits for a renewal of `node`'s registration after this call: its expiry in Redis moves on. */
async function renewed(node: string): Promise<void> {
  const key = new Keys('lapse:').nodes();
  const first = Number(await redis.zscore(key, node));
  await waitUntil(`a renewal of ${node}`, async () => Number(await redis.zscore(key, node)) > first, 5000, 10);
}

/** The lapse warnings among `lines`. */
const lapses = (lines: LogLine[]): LogLine[] => lines.filter((l) => l.level === 40 && typeof l.msg === 'string' && l.msg.includes('written back'));

test('a renewal that ran late because the event loop was held says so, and how late, not that Redis lost the registration', async () => {
  const { lines, again } = await startRegistry('held-node');
  // A renewal on time first.
  await renewed('held-node');
  // (A loaded test machine may have run one late already: the lines from here on count.)
  const [seen, logged] = [again(), lapses(lines).length];
  // The event loop held 1.5 s, as by a long request: the thread blocked, not spinning.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
  await waitUntil('the registration written again', async () => again() > seen, 5000, 10);
  // The hold's line is the latest of the new ones: on a loaded machine a renewal may
  // have run a little late (0.1 s) between the count above and the hold, and said so first.
  const line = lapses(lines).slice(logged).at(-1);
  const late = LATE.exec(line?.msg ?? '');
  assert.ok(late, `the lapse line: ${JSON.stringify(line)}`);
  // Due 100 ms after the last renewal, run ~1.5 s after it: about 1.4 s late.
  const seconds = Number(late[1]);
  assert.ok(seconds >= 1.2 && seconds < 3, `${seconds} s late`);
  assert.equal(line?.node, 'held-node');
  assert.equal(line?.failedRenewals, 0);
  assert.equal(typeof line?.lateMs, 'number');
});

test('a registration Redis lost while the node renewed on time keeps the words of a lost registration', async () => {
  const { lines, again } = await startRegistry('flushed-node');
  await renewed('flushed-node');
  await redis.zrem(new Keys('lapse:').nodes(), 'flushed-node');
  await waitUntil('the registration written again', async () => again() === 1, 5000, 10);
  const [line] = lapses(lines);
  assert.equal(line?.msg, 'node registration had lapsed or was lost; presence and shared settings written back');
  assert.equal(line?.lateMs, undefined);
});
