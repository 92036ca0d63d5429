/**
 * The bus's request to read a user's inbox (src/cluster/bus.ts `pull`, sent after a
 * rotation: src/gateway/rotation-wake.ts) travels as a notify entry `[user, 0]`, the
 * shape every node taking `[user, seq]` reads at once. In the same tick as an append's
 * notify for the user it is sent besides it, not folded into it: a notify of a new seq
 * alone reads nothing for a full window (pull-target.ts), so the `reset` would wait.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Bus } from '../../src/cluster/bus.js';
import { createLogger } from '../../src/logger.js';
import { Keys } from '../../src/redis/keys.js';

test('a pull is published as [user, 0], besides an append notify of the same user in the tick, once per user', async () => {
  const keys = new Keys('bp:');
  const published: Array<{ channel: string; message: unknown }> = [];
  const redis = {
    publish: (channel: string, text: string) => { published.push({ channel, message: JSON.parse(text) }); return Promise.resolve(1); },
  } as unknown as Redis;
  const bus = new Bus({
    node: 'here', redis, subscriber: redis, keys, logger: createLogger('silent'),
    onNotify: () => undefined, onKick: () => undefined, onGone: () => undefined,
  });
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
