/**
 * The broadcast and channel publish scripts stay Redis-Cluster-safe with their markers
 * (broadcast-publish-2.lua, channel-publish-4.lua; src/redis/keys.ts `broadcastMarker`,
 * `channelMarker`): on a Redis with cluster mode on (one node serving every slot), a
 * script's keys must hash to one slot or it is refused CROSSSLOT. The broadcast
 * marker's hash tag is the stream's whole key name, so both land in the stream's slot,
 * under any prefix: a publish once per MsgID runs there, sets its marker, and a second
 * one answers the first bseq. A channel's marker shares its history's tag.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { BroadcastStream } from '../../src/broadcast/broadcast-stream.js';
import { ChannelStream } from '../../src/channels/channel-stream.js';
import { Keys } from '../../src/redis/keys.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const cleanup = cleanupList();
let redis: Redis;

before(async () => {
  const server = await RedisServer.start({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'] });
  cleanup.after(() => server.destroy());
  ({ redis } = await openInbox(cleanup, server.url));
  await redis.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  await waitUntil('the one-node cluster serves every slot', async () => /cluster_state:ok/.test(await redis.call('CLUSTER', 'INFO') as string));
});

after(() => cleanup.run());

test('the marker and the stream are in one Cluster slot, under any prefix, and the publish script runs on a cluster node', async () => {
  for (const prefix of ['px:', 'other-app:', 'a']) {
    const keys = new Keys(prefix);
    const marker = keys.broadcastMarker('0300000000000001');
    assert.equal(await redis.call('CLUSTER', 'KEYSLOT', marker), await redis.call('CLUSTER', 'KEYSLOT', keys.broadcast()), prefix);
  }
  // Keys of several prefixes hash to several slots; this node serves them all.
  const keys = new Keys('px:');
  const stream = new BroadcastStream(redis, keys, 100);
  const entry = { msgId: '0300000000000001', type: 'news', ts: Date.now(), dataJson: '{"n":1}', filter: undefined, expiresAt: Date.now() + 60_000 };
  const first = await stream.publishOnce(entry, '');
  assert.equal(first.before, false);
  assert.deepEqual(await stream.publishOnce(entry, ''), { bseq: first.bseq, before: true, filterKey: '' });
  assert.equal(await redis.xlen(keys.broadcast()), 1);
  // A broadcast without a key still runs the one script (its marker key named, not written).
  await stream.publish({ ...entry, msgId: '0300000000000002' });
  assert.equal(await redis.exists(keys.broadcastMarker('0300000000000002')), 0);
});

test('a channel publication\'s marker is in its history\'s slot, and the publish script runs on a cluster node', async () => {
  const keys = new Keys('px:');
  assert.equal(await redis.call('CLUSTER', 'KEYSLOT', keys.channelMarker('live.chat', 'k {x} 1')), await redis.call('CLUSTER', 'KEYSLOT', keys.channelHistory('live.chat')));
  const stream = new ChannelStream(redis, keys, 100, 60_000);
  const first = await stream.publishOnce('live.chat', 't', Date.now(), '1', 'k {x} 1', 'f1');
  assert.deepEqual(await stream.publishOnce('live.chat', 't', Date.now(), '1', 'k {x} 1', 'f1'), { ...first, before: true });
  await stream.publish('live.chat', 't', Date.now(), '2');
  assert.equal(await redis.xlen(keys.channelHistory('live.chat')), 2);
});
