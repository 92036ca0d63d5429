/**
 * `pixiu_channel_gaps_total` counts the channel `gap` frames written (docs/api.md "GET
 * /metrics"), as `pixiu_broadcast_gaps_total` does broadcast ones: a gap that goes to a
 * connection already closing is dropped by it unwritten and not counted (it was: the
 * channel counter counted before the write, a reviewer's L9). ConnectionChannels with a
 * hub and history that answer at once, and a connection that says whether it wrote;
 * a broadcast feed counts by the same answer of the connection's send().
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChannelHub } from '../../src/channels/channel-hub.js';
import type { ChannelStream } from '../../src/channels/channel-stream.js';
import { ConnectionChannels, type PubSink } from '../../src/channels/connection-channels.js';
import { LogThrottle } from '../../src/log-throttle.js';
import { BroadcastSubscription, tagSet } from '../../src/broadcast/subscription.js';

/** A connection following `c.x` from now (its history empty), writing while `open()` says so. */
async function following(open: () => boolean): Promise<{ channels: ConnectionChannels; frames: string[]; gaps: () => number }> {
  const hub = { round: 0, join: async () => {}, leave: () => {}, barrier: async () => {}, refilling: () => false, refilled: async () => {} };
  const stream = { newestId: async () => undefined };
  let gaps = 0;
  const frames: string[] = [];
  const sink: PubSink = {
    send: (text) => (open() ? frames.push(text) > 0 : false),
    whenWritable: () => undefined,
  };
  const deps = { hub: hub as unknown as ChannelHub, stream: stream as unknown as ChannelStream, subFailureLog: new LogThrottle(10_000), onGap: () => { gaps++; } };
  const channels = new ConnectionChannels(deps, () => ['c.*'], sink);
  await channels.sub('c.x', undefined);
  return { channels, frames, gaps: () => gaps };
}

const LOST = { after: '0-0', before: '5-0', lastLost: '4-0' };

test('a channel gap written to the connection is counted once', async () => {
  const { channels, frames, gaps } = await following(() => true);
  channels.offerLost('c.x', LOST);
  assert.deepEqual(frames.map((f) => JSON.parse(f) as unknown), [
    { t: 'subscribed', channel: 'c.x', since: '0-0' },
    { t: 'gap', stream: 'channel', channel: 'c.x', from: '0-0', to: '5-0' },
  ]);
  assert.equal(gaps(), 1);
});

test('a channel gap to a connection closing is not written, and not counted', async () => {
  let open = true;
  const { channels, frames, gaps } = await following(() => open);
  open = false;
  channels.offerLost('c.x', LOST);
  assert.equal(frames.length, 1, 'only the subscribed frame');
  assert.equal(gaps(), 0);
});

test('a broadcast gap is counted only when the connection wrote it, by the same answer of send()', () => {
  for (const open of [true, false]) {
    let counted = 0;
    const written: string[] = [];
    const feed = new BroadcastSubscription(tagSet([]), {
      send: (frame) => (open ? written.push(String(frame)) > 0 : false),
      countGap: () => { counted++; },
      sendFrames: () => assert.fail('no bcast'),
      whenWritable: () => undefined,
    });
    feed.sendGap('1-0', '5-0');
    assert.deepEqual([written.length, counted], open ? [1, 1] : [0, 0], `open: ${open}`);
  }
});
