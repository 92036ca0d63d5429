/**
 * An inbox's retention is judged on Redis's clock (src/inbox/lua/append-13.lua step 6;
 * docs/decisions.md "Inbox retention"): the keys' expiry (`PEXPIREAT`) is never in
 * Redis's past, whatever the appending node believes the time is.
 *
 * A node passes the append its estimate of Redis's clock (Inbox `now`: its own clock
 * plus the offset its registry measured at the last renewal, NodeRegistry.now), and the
 * content's expiry on its own clock. Right after its clock is set back (an NTP step, a VM
 * resumed), until its next renewal (up to 5 s), both are behind Redis's by the step.
 * append-12 kept `keep` out of the past by that estimate alone: with a step of a day and
 * two minutes, a message of `ttl` 60 gave the keys an expiry two minutes in Redis's past,
 * Redis deleted them at once, the producer was answered 201, and the next message was
 * given seq 1 again under a new epoch, no device told anything (walk31 F1, reproduced
 * with libfaketime). Here the Inbox is given that stale clock (its `now` seam) over a
 * private redis-server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox, INBOX_RETENTION_GRACE_MS } from '../../src/inbox/inbox.js';
import { Keys } from '../../src/redis/keys.js';
import { redisNowMs } from '../../src/redis/client.js';

let redis: Redis;
const keys = new Keys('px:');

fileRedis(async (ctx) => {
  ({ redis } = await openInbox(ctx.cleanup, ctx.redis.url));
});

/** How far the appending node's clock (and so its estimate of Redis's) is behind: a day and two minutes, ms. */
const STEP_MS = 86_400_000 + 120_000;

/** The n-th test MsgID. */
function msgId(n: number): string {
  return encodeMsgId({ partition: 0, kind: MsgKind.user, counter: n });
}

test('an append from a node whose clock (and estimate of Redis\'s) is a day behind keeps the inbox a grace past Redis\'s now: no keys lost, no seq given twice', async () => {
  const behind = (): number => Date.now() - STEP_MS;
  const skewed = new Inbox(redis, { prefix: 'px:', cap: 10_000, now: behind });
  const uid = 'behind-a-day';
  const k = keys.user(uid);
  const before = await redisNowMs(redis);
  // Three messages of ttl 60 s, their expiry on the node's clock (new-message.ts).
  const seqs: number[] = [];
  const epochs = new Set<string>();
  for (let n = 1; n <= 3; n++) {
    const appended = await skewed.append(uid, msgId(n), MsgKind.user, { expiresAt: behind() + 60_000 });
    seqs.push(appended.seq);
    epochs.add(appended.epoch);
  }
  assert.deepEqual(seqs, [1, 2, 3], 'each message its own seq');
  assert.equal(epochs.size, 1, 'one epoch');
  const after = await redisNowMs(redis);
  for (const key of [k.inbox, k.meta, k.ids]) {
    const at = await redis.pexpiretime(key);
    assert.ok(at >= before + INBOX_RETENTION_GRACE_MS && at <= after + INBOX_RETENTION_GRACE_MS,
      `${key} expires at ${at}, a grace (${INBOX_RETENTION_GRACE_MS} ms) past Redis's now (${before}..${after})`);
  }
  const page = await skewed.range(uid, 0, 10);
  assert.deepEqual(page.entries.map((e) => e.seq), [1, 2, 3]);
});
