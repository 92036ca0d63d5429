/**
 * After a live `reset` to an epoch that goes on from the old one's numbering, the
 * retained messages the connection was sent under the old epoch come again marked
 * `redelivered` (docs/protocol.md, `msg` and "Server → client"; resent-marks.ts), and
 * those it never had come unmarked. A black-box tester's finding F1 (walk14): device x
 * got msg 1..3 and acked 2; device y of the same user connected with last_seq 10 and x's
 * epoch (above the latest: a new epoch, case 2 of "Where delivery starts"); on x's open
 * connection came `reset` then msg 1..3 again — same ids and seqs — unmarked, though the
 * docs said a message is sent again on one connection only marked. After an inbox lost
 * (no lineage: the seqs restart and name other messages) nothing is marked.
 *
 * Real redis-server (the harness's), real service in process with its default
 * settings, real WebSocket clients.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
import type { Frame, TestClient } from '../harness/ws-client.js';
import { Keys } from '../../src/redis/keys.js';
import { expectFrame, expectMsgs, expectWelcome, postMany, postOne, startDelivery } from './delivery-fixture.js';

/** The `msg` frames up to and including seq `lastSeq`, as `seq id` with ` r` when marked; any other frame fails. */
async function msgsThrough(client: TestClient, lastSeq: number): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const f: Frame = await client.next();
    assert.equal(f.t, 'msg', JSON.stringify(f));
    out.push(`${String(f.seq)} ${String(f.id)}${f.redelivered === true ? ' r' : ''}`);
    if (f.seq === lastSeq) return out;
  }
}

const marked = (ids: readonly string[], mark: string): string[] => ids.map((id, i) => `${i + 1} ${id}${mark}`);

/** A service with its own redis-server (its defaults otherwise) and `user`'s device x connected with last_seq 0 and sent msg 1..3, unacked. */
async function xSentThree(t: CleanupContext, prefix: string, user: string) {
  const steps = cleanupList();
  t.after(() => steps.run());
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  const { gw, redis } = await startDelivery(steps, prefix, { redisUrl: own.url });
  const ids = await postMany(gw.client, user, 3);
  const x = await gw.connect(user, { device: 'x', params: { last_seq: 0 } });
  const epoch = (await expectWelcome(x, 1, 3)).epoch as string;
  await expectMsgs(x, 1, 3, ids, 1, { ackEvery: 0 });
  return { gw, redis, ids, x, epoch };
}

test('a connected device reset by another device\'s claim (above the latest, with its epoch) gets the messages it had again marked redelivered; the claiming device and a new message are not marked', async (t) => {
  const user = 'vera';
  const { gw, ids, x, epoch } = await xSentThree(t, 'rrm1', user);
  x.ack(2);

  const y = await gw.connect(user, { device: 'y', params: { last_seq: 10, epoch } });
  await expectWelcome(y, 1, 3);
  const reset = await expectFrame(y, 'reset');
  assert.notEqual(reset.epoch, epoch, 'a new epoch');
  assert.deepEqual(await msgsThrough(y, 3), marked(ids, ''), 'never sent on y\'s connection: not marked');

  assert.deepEqual(await x.next(), { t: 'reset', epoch: reset.epoch, seq: 3 });
  assert.deepEqual(await msgsThrough(x, 3), marked(ids, ' r'), 'before: the same ids and seqs, unmarked');

  const fresh = await postOne(gw.client, user);
  assert.equal(fresh.seq, 4);
  assert.deepEqual(await msgsThrough(x, 4), [`4 ${fresh.id}`], 'news');
  assert.deepEqual(await msgsThrough(y, 4), [`4 ${fresh.id}`], 'news');
});

test('a connected device whose inbox Redis lost (no lineage: the seqs restart) gets the new messages unmarked after its reset', async (t) => {
  const user = 'wim';
  const { gw, redis: raw, x, epoch } = await xSentThree(t, 'rrm2', user);
  const keys = new Keys('rrm2:').user(user);
  await raw.del(keys.inbox, keys.meta, keys.ids, keys.acks); // Redis lost the user's inbox
  const fresh = await postOne(gw.client, user); // seq 1 of a new inbox

  const frames: string[] = [];
  for (;;) {
    const f = await x.next();
    if (f.t === 'reset') {
      assert.notEqual(f.epoch, epoch);
      frames.length = 0; // one reset; what follows it counts
      frames.push('reset');
    } else {
      assert.equal(f.t, 'msg', JSON.stringify(f));
      frames.push(`${String(f.seq)} ${String(f.id)}${f.redelivered === true ? ' r' : ''}`);
      if (f.seq === 1) break;
    }
  }
  assert.deepEqual(frames, ['reset', `1 ${fresh.id}`]);
});
