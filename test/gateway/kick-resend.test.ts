/**
 * What a kick sent again does once its node takes it, and when it stops
 * (src/gateway/kicks.ts `#again`, `#gaveUp`): a DELETE's kicks, one per connection, are
 * each sent again until the node's subscriber is back, then no more; a node shutting
 * down sends none again; and the kicks given up on after a first warning are gathered
 * into a warning of their own. The kicks module on a real Redis with real node
 * registries and buses: the node holding the connections is a registry renewing, whose
 * bus subscribes only when the test says (its kicks before are received by nobody).
 * Registry timings as in kick-given-up.test.ts (renewal 500 ms, lifetime 3 s: kicks
 * are sent again for 3.5 s).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Bus, type KickMessage } from '../../src/cluster/bus.js';
import type { NodeRegistry } from '../../src/cluster/node-registry.js';
import type { Presence } from '../../src/cluster/presence.js';
import { KICK_RETRY_MS, type Kicks } from '../../src/gateway/kicks.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { capturingLogger } from '../harness/log-capture.js';
import type { CleanupList } from '../harness/pixiu-server.js';
import { givenUp, registeredNode, sendingKicks } from './kick-fixture.js';

const keys = new Keys('krs:');
/** The gathering of given-up kicks, ms. */
const GATHER_MS = 300;

let redis: Redis;
let url: string;
let cleanup: CleanupList;

fileRedis(async (ctx) => {
  cleanup = ctx.cleanup;
  url = ctx.redis.url;
  ({ redis } = await openInbox(ctx.cleanup, ctx.redis.url, 'krs:'));
});

/** A started registry of `node` (kick-fixture.ts). */
const registered = (node: string): Promise<NodeRegistry> => registeredNode(redis, keys, cleanup, node);

/** The bus of `node`, subscribed: the kicks it receives. */
async function listening(node: string): Promise<KickMessage[]> {
  const received: KickMessage[] = [];
  const subscriber = await createRedis({ url, commandTimeoutMs: 10_000, name: 'pixiu:test-sub' });
  cleanup.after(() => subscriber.disconnect());
  const bus = new Bus({
    node, redis, subscriber, keys, logger: createLogger('silent'),
    onNotify: () => undefined, onKick: (k) => received.push(k), onGone: () => undefined,
  });
  await bus.start();
  return received;
}

/** Kicks of node `here`, sending through a bus that only publishes (kick-fixture.ts). */
function kicksOf(registry: NodeRegistry, logger = createLogger('silent'), accepting = (): boolean => true, presence?: Pick<Presence, 'list' | 'closeConns'>): Kicks {
  return sendingKicks({ redis, keys, registry, logger, accepting, givenUpLogMs: GATHER_MS, ...(presence ? { presence } : {}) });
}

test('a DELETE\'s kicks its node missed are each sent again until the node takes them, then no more', { timeout: 30_000 }, async () => {
  const registry = await registered('here');
  await registered('late');
  const { logger, lines } = capturingLogger();
  const conns = ['c1', 'c2', 'c3'];
  const presence = {
    list: async () => conns.map((conn) => ({ conn, node: 'late', device: conn, since: 1, expiresAt: Date.now() + 60_000 })),
    closeConns: async () => undefined,
  } as unknown as Pick<Presence, 'list' | 'closeConns'>;
  const kicks = kicksOf(registry, logger, () => true, presence);
  assert.equal(await kicks.user('ann', undefined, 1008, 'disconnected by the service'), 3);
  const received = await listening('late'); // its subscriber back after the DELETE's kick
  await waitUntil('the three connections kicked', async () => received.length >= 3, 10_000);
  // Past the time they would be sent again for: nothing more, nothing given up.
  await new Promise((resolve) => setTimeout(resolve, kicks.retryForMs + 2 * GATHER_MS));
  assert.deepEqual(received.map((k) => k.conn), conns, 'each once (before: c1 alone when the first of a resend was taken, or each again and again)');
  assert.deepEqual(givenUp(lines), [], 'taken: not given up on');
});

test('a node shutting down sends no kick again', { timeout: 30_000 }, async () => {
  const registry = await registered('here');
  await registered('late-too'); // not 'late': that one's bus listens since the test before
  let accepting = true;
  const kicks = kicksOf(registry, createLogger('silent'), () => accepting);
  kicks.connection('ann', 'c1', 'late-too', 4002, 'replaced by a new connection of the same device');
  accepting = false; // shutdown began: its Redis is closing
  const received = await listening('late-too');
  // An absence, so a bounded wait: six of the resend's intervals with the subscriber
  // listening, in which a node still sending would have been heard at each.
  await new Promise((resolve) => setTimeout(resolve, 6 * KICK_RETRY_MS));
  assert.deepEqual(received, [], 'before: sent again once its subscriber was back');
});

test('kicks given up on after a node\'s first warning are gathered into a warning of their own', { timeout: 30_000 }, async () => {
  const registry = await registered('here');
  await registered('deaf');
  const { logger, lines } = capturingLogger();
  const kicks = kicksOf(registry, logger);
  kicks.connection('ann', 'c1', 'deaf', 4002, 'replaced by a new connection of the same device');
  await waitUntil('the first warning', async () => givenUp(lines).length === 1, 15_000);
  kicks.connection('bob', 'c2', 'deaf', 4002, 'replaced by a new connection of the same device');
  await waitUntil('the second warning', async () => givenUp(lines).length === 2, 15_000);
  assert.deepEqual(givenUp(lines).map((l) => [l.node, l.connections, l.conns]), [['deaf', 1, ['c1']], ['deaf', 1, ['c2']]], 'before: c2 added to the first gathering, never logged');
});
