/**
 * The bus's request to read a user's inbox (src/cluster/bus.ts `pull`, sent after a
 * rotation: src/gateway/rotation-wake.ts) travels as a notify entry `[user, 0]`, the
 * shape every node taking `[user, seq]` reads at once. In the same tick as an append's
 * notify for the user it is sent besides it, not folded into it: a notify of a new seq
 * alone reads nothing for a full window (pull-target.ts), so the `reset` would wait.
 * And the notifies of one user in a tick are folded into the highest seq, in whatever
 * order they came: folded into the last one, a lower seq told the user's node nothing
 * of the newer message, which then waited for the next read. A notify no subscriber
 * received names its node and users to `onGone` (the gateway drops that node's presence
 * entries of those users once it is unregistered).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Bus } from '../../src/cluster/bus.js';
import { createLogger } from '../../src/logger.js';
import { Keys } from '../../src/redis/keys.js';

const keys = new Keys('bp:');

/**
 * A bus whose publishes are recorded in `published`, not sent; each reaches
 * `receivers` subscribers, and the nodes reached by none are recorded in `gone`.
 */
function recordingBus(receivers = 1): { bus: Bus; published: Array<{ channel: string; message: unknown }>; gone: Array<[string, string[]]> } {
  const published: Array<{ channel: string; message: unknown }> = [];
  const gone: Array<[string, string[]]> = [];
  const redis = {
    publish: (channel: string, text: string) => { published.push({ channel, message: JSON.parse(text) }); return Promise.resolve(receivers); },
  } as unknown as Redis;
  const bus = new Bus({
    node: 'here', redis, subscriber: redis, keys, logger: createLogger('silent'),
    onNotify: () => undefined, onKick: () => undefined, onGone: (node, users) => { gone.push([node, [...users]]); },
  });
  return { bus, published, gone };
}

test('a pull is published as [user, 0], besides an append notify of the same user in the tick, once per user', async () => {
  const { bus, published } = recordingBus();
  bus.notify('b', 'ann', 4, 'id4');
  bus.pull('b', 'ann');
  bus.pull('b', 'ann');
  bus.notify('b', 'ann', 5, 'id5');
  bus.pull('b', 'bob');
  bus.notify('c', 'cy', 2, 'id2');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(published, [
    { channel: keys.nodeChannel('b'), message: { t: 'notify', users: [['ann', 5, 'id5'], ['ann', 0], ['bob', 0]] } },
    { channel: keys.nodeChannel('c'), message: { t: 'notify', users: [['cy', 2, 'id2']] } },
  ]);
});

test('notifies of one user in a tick are folded into the highest seq and its id, whatever their order', async () => {
  const { bus, published } = recordingBus();
  bus.notify('b', 'ann', 7, 'id7');
  bus.notify('b', 'ann', 6, 'id6');
  bus.notify('b', 'ann', 5, 'id5');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(published, [{ channel: keys.nodeChannel('b'), message: { t: 'notify', users: [['ann', 7, 'id7']] } }]);
});

test('a notify no subscriber received names its node and the users it was for, once per node', async () => {
  const { bus, gone } = recordingBus(0);
  bus.notify('dead', 'ann', 3, 'id3');
  bus.notify('dead', 'bob', 1, 'id1');
  bus.pull('dead', 'cy');
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(gone, [['dead', ['ann', 'bob', 'cy']]]);
});
