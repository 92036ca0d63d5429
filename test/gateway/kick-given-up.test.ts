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
import type { NodeRegistry } from '../../src/cluster/node-registry.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import type { CleanupList } from '../harness/pixiu-server.js';
import { givenUp, registeredNode, sendingKicks } from './kick-fixture.js';

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

/** A started registry of `node` (kick-fixture.ts: renewal 500 ms, lifetime 3 s). */
const registered = (node: string): Promise<NodeRegistry> => registeredNode(redis, keys, cleanup, node);

test('kicks a registered node never takes are given up on and logged as one line naming how many connections, not one per kick', { timeout: 30_000 }, async () => {
  const registry = await registered('here');
  await registered('deaf');
  const { logger, lines } = capturingLogger();
  const kicks = sendingKicks({ redis, keys, registry, logger, givenUpLogMs: GATHER_MS });
  assert.equal(kicks.retryForMs, 3500, 'sent again for the registration\'s lifetime and one renewal');

  for (let i = 0; i < KICKS; i++) kicks.connection(`user-${i}`, `conn-${i}`, 'deaf', 4002, 'replaced by a new connection of the same device');

  const given = (): LogLine[] => givenUp(lines);
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
