/**
 * Kicks given up on while their node stayed registered (src/gateway/kicks.ts): a node
 * alive — renewing its registration — whose subscriber never takes them. Each is sent
 * again until a registration could have lapsed and one renewal more, then given up;
 * the node's given-up kicks are logged as one warning per gathering, naming how many
 * connections stay open and the first few, not one line per kick (a crash tester's L2:
 * 82 lines at once).
 *
 * The kicks module on a real Redis with real node registries and bus, its timings
 * those of the registries (renewal 100 ms, lifetime 300 ms: kicks are sent again for
 * 400 ms) and a gathering of 500 ms, in place of the node's 5 s, 15 s and 10 s. The
 * deaf node is a registry renewing with no bus subscriber.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Bus } from '../../src/cluster/bus.js';
import { NodeRegistry } from '../../src/cluster/node-registry.js';
import type { Presence } from '../../src/cluster/presence.js';
import { Kicks } from '../../src/gateway/kicks.js';
import { PendingHandshakes } from '../../src/gateway/pending-handshakes.js';
import { createLogger } from '../../src/logger.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import type { CleanupList } from '../harness/pixiu-server.js';

const keys = new Keys('kgu:');
/** Kicks sent to the deaf node. */
const KICKS = 40;
/** The gathering of given-up kicks, ms. */
const GATHER_MS = 500;

let redis: Redis;
let cleanup: CleanupList;

fileRedis(async (ctx) => {
  cleanup = ctx.cleanup;
  ({ redis } = await openInbox(ctx.cleanup, ctx.redis.url, 'kgu:'));
});

/**
 * A started registry of `node`: renewal 500 ms, lifetime 3 s. A lifetime of 300 ms lapsed
 * on a loaded machine (a clean-clone CI run at load 14): the deaf node's registration
 * ran out between two late renewals, and its kicks were not the ones given up on while
 * it stayed registered, so no line came within the test's wait.
 */
async function registered(node: string): Promise<NodeRegistry> {
  const registry = new NodeRegistry(redis, keys, { node, intervalMs: 500, ttlMs: 3000, logger: createLogger('silent') });
  await registry.start();
  cleanup.after(() => registry.stop());
  return registry;
}

test('kicks a registered node never takes are given up on and logged as one line naming how many connections, not one per kick', { timeout: 30_000 }, async () => {
  const registry = await registered('here');
  await registered('deaf');
  const { logger, lines } = capturingLogger();
  const bus = new Bus({
    // Never started (only sends here), so its subscriber connection is never used.
    node: 'here', redis, subscriber: redis, keys, logger,
    onNotify: () => undefined, onKick: () => undefined, onGone: () => undefined,
  });
  const unused = (): never => assert.fail('presence is not read for a connection\'s kick');
  const kicks = new Kicks({
    node: 'here', bus, registry, presence: { list: unused, closeConns: unused } satisfies Pick<Presence, 'list' | 'closeConns'>,
    handshakes: new PendingHandshakes(), hub: { connectionsOf: () => [] }, accepting: () => true, logger, givenUpLogMs: GATHER_MS,
  });
  assert.equal(kicks.retryForMs, 3500, 'sent again for the registration\'s lifetime and one renewal');

  for (let i = 0; i < KICKS; i++) kicks.connection(`user-${i}`, `conn-${i}`, 'deaf', 4002, 'replaced by a new connection of the same device');

  const given = (): LogLine[] => lines.filter((l) => /^kicks? not received/.test(String(l.msg)));
  await waitUntil('the given-up kicks logged', async () => given().length > 0, 20_000);
  // A gathering more: no second line comes.
  await new Promise((resolve) => setTimeout(resolve, 2 * GATHER_MS));
  const logged = given();
  assert.equal(logged.length, 1, JSON.stringify(logged));
  const [line] = logged;
  assert.equal(line?.level, 40);
  assert.equal(line?.msg, 'kicks not received by their node while it stayed registered; it closes those connections at their next presence refresh that reaches Redis');
  assert.equal(line?.node, 'deaf');
  assert.equal(line?.connections, KICKS);
  assert.deepEqual(line?.conns, ['conn-0', 'conn-1', 'conn-2', 'conn-3', 'conn-4']);
  assert.equal(line?.retriedForMs, 3500);
});
