/**
 * A node that stops while a renewal of its registration is under way, and that renewal
 * finds the registration lost and writes the shared settings back (node-membership.ts):
 * once stopped, the node leaves neither its registration nor its node-settings entry
 * in Redis. Both had been written again after the node withdrew them, left for the
 * other nodes to clean up (redisrest F7). A real redis-server; the renewal is held in
 * flight by CLIENT PAUSE WRITE, which holds the stop's own writes too, as a Redis slow
 * to answer does.
 */
import { once } from 'node:events';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { NodeMembership } from '../../src/cluster/node-membership.js';
import { loadConfig } from '../../src/config/config.js';
import { Keys } from '../../src/redis/keys.js';
import { createRedis } from '../../src/redis/client.js';
import { holdsOnPause, openInbox, waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';

/** The name of the renewals' connection in CLIENT LIST. */
const RENEWALS_CONNECTION = 'pixiu:test-renewals';

test('a node stopping while a renewal under way finds its registration lost leaves no registration and no node-settings entry', async (t) => {
  const server = await RedisServer.start();
  t.after(() => server.destroy());
  const [{ redis: admin }, { redis }] = [await openInbox(t, server.url), await openInbox(t, server.url)];
  // The renewals' connection under a name of its own, to be told apart in CLIENT LIST
  // (ioredis names it again when it reconnects).
  const renewals = await createRedis({ url: server.url, commandTimeoutMs: 10_000, name: RENEWALS_CONNECTION });
  t.after(() => renewals.disconnect());
  const keys = new Keys('stopping:');
  const node = 'stopping-node';
  const membership = new NodeMembership({ redis, renewals, keys, node, logger: capturingLogger().logger, onRenewed: () => undefined, onRegisteredAgain: () => undefined });
  await membership.start({ config: loadConfig({}, { redisUrl: server.url }) });
  assert.notEqual(await admin.hget(keys.nodeSettings(), node), null, 'its entry, published at start');

  // The registration lost (as to a FLUSHALL); writes held; a renewal (the one a
  // reconnect makes) reads Redis's clock and sends its writes, which wait. The pause is
  // far longer than any load can use up before the ZADD is queued (1.5 s could end
  // first on a loaded box), and is ended by hand once the stop has begun: the stop's
  // own writes wait on it too, so the unpause comes before the stop is awaited. (A test
  // that fails before it ends the pause with its server, killed at the test's end.)
  await admin.zrem(keys.nodes(), node);
  await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
  renewals.disconnect(true);
  await once(renewals, 'ready');
  // As Redis shows it (not ioredis's private command queue): the renewal's ZADD, its first
  // write, is the command its connection holds.
  await waitUntil('the renewal\'s ZADD waits on the pause', () => holdsOnPause(admin, RENEWALS_CONNECTION, 'zadd'), 5000, 5);
  const stopping = membership.stop();
  await admin.call('CLIENT', 'UNPAUSE');
  await stopping;
  // Nothing to wait on for a write that must not come: a write-back started late (a read,
  // then its write) has gone out within 500 ms of the unpause, many round trips.
  await delay(500);
  assert.equal(await admin.zscore(keys.nodes(), node), null, 'no registration left');
  assert.equal(await admin.hget(keys.nodeSettings(), node), null, 'no node-settings entry left');
});
