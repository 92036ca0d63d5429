/**
 * An inbox entry that is not what the append script writes (an operator's or a tool's
 * `XADD`: the core review's F2) costs its own seq, never the ones after it, end to end on
 * a real Redis and real sockets: delivery sends a `gap` of that seq with reason
 * `undeliverable` between the messages around it, each device gets its `welcome`, and
 * history lists the gap; the node logs the entry once at warn. Before, reading the page
 * threw, and delivery retried the read forever as if Redis were down: no `welcome`,
 * nothing after the entry (DESIGN.md §5: never a stall); history answered 500.
 *
 * An entry below every seq (`0-1`) or at the seq of the entry before it (`2-1` after
 * `2-0`) is no gap at all: it still counts in the page it comes in, so a full page is not
 * taken for the end of the inbox (which would make the seqs after it `trimmed` gaps).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { RedisServer } from '../harness/redis-server.js';
import type { CleanupContext } from '../harness/pixiu-server.js';
import type { GatewayFixture } from './gateway-fixture.js';
import { expectFrame, expectMsgs, expectWelcome, postMany, postOne, startDelivery } from './delivery-fixture.js';

/** What the node logs for an entry it gives as a gap. */
const LOG_MSG = /^inbox entry is not one the append script writes/;

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/** The node's warnings about `user`'s malformed entries: their stream IDs, in the order logged. */
function warned(lines: readonly LogLine[], user: string): unknown[] {
  return lines.filter((l) => LOG_MSG.test(l.msg ?? '') && l.user === user).map((l) => [l.level, l.entryId]);
}

/** Reads `user`'s whole history `limit` entries a page: the messages' seqs and the gaps. */
async function readHistory(gw: GatewayFixture, user: string, limit: number): Promise<{ seqs: number[]; gaps: unknown[] }> {
  const seqs: number[] = [];
  const gaps: unknown[] = [];
  for (let after = 0; ;) {
    const res = await gw.client.get(`/v1/users/${user}/messages?after_seq=${after}&limit=${limit}`);
    assert.equal(res.status, 200, res.text.slice(0, 300));
    const page = res.body as { messages: { seq: number }[]; gaps: unknown[]; next_after_seq: number; latest_seq: number };
    seqs.push(...page.messages.map((m) => m.seq));
    gaps.push(...page.gaps);
    if (page.next_after_seq >= page.latest_seq) return { seqs, gaps };
    assert.ok(page.next_after_seq > after, `history moves on from ${after}`);
    after = page.next_after_seq;
  }
}

/** Connects `user` as `device` on `gw`, closed when the test ends. */
async function connect(t: CleanupContext, gw: GatewayFixture, user: string, device: string): ReturnType<GatewayFixture['connect']> {
  const client = await gw.connect(user, { device });
  t.after(() => client.close());
  return client;
}

test('an entry whose id is no MsgID is an undeliverable gap between the messages around it, for each device and in history; logged once', async (t) => {
  const { logger, lines } = capturingLogger();
  const { gw, redis: r } = await startDelivery(t, 'malformed', { redisUrl: redis.url }, logger);
  const first = await postOne(gw.client, 'mara');
  assert.equal(first.seq, 1);
  // The review's repro: one entry written by something other than the append script.
  await r.xadd('malformed:{mara}:inbox', '2-0', 'id', 'NOT-HEX', 'kind', '1');
  const third = await postOne(gw.client, 'mara');
  assert.equal(third.seq, 3);

  // Two devices, one after the other, as a reconnect would: each gets the same frames.
  for (const device of ['phone', 'laptop']) {
    const client = await connect(t, gw, 'mara', device);
    await expectWelcome(client, 1, 3);
    await expectMsgs(client, 1, 1, [first.id]);
    assert.deepEqual(await expectFrame(client, 'gap'), { t: 'gap', from: 2, to: 2, reason: 'undeliverable' });
    await expectMsgs(client, 3, 3, [third.id], 3);
    await client.close();
  }
  assert.deepEqual(await readHistory(gw, 'mara', 100), { seqs: [1, 3], gaps: [{ from: 2, to: 2, reason: 'undeliverable' }] });

  // Read by two devices and history: one line, at warn, naming the user and the entry.
  assert.deepEqual(warned(lines, 'mara'), [[40, '2-0']]);
  assert.deepEqual(lines.filter((l) => l.msg === 'delivery fetch failed, will retry'), [], 'no read failed');
});

test('an entry below every seq (0-1) or at the seq of the one before it (2-1) is no gap, and a page it fills is not the end of the inbox', async (t) => {
  const { logger, lines } = capturingLogger();
  // A window of 2 reads 2 entries a page: the first holds 0-1 and seq 1, a later one 2-1 and seq 3.
  const { gw, redis: r } = await startDelivery(t, 'malformed-edges', { redisUrl: redis.url, deliveryWindow: '2' }, logger);
  const inbox = 'malformed-edges:{nell}:inbox';
  await r.xadd(inbox, '0-1', 'id', 'junk', 'kind', '1');
  const ids = await postMany(gw.client, 'nell', 2);
  await r.xadd(inbox, '2-1', 'id', 'junk', 'kind', '1');
  ids.push(...await postMany(gw.client, 'nell', 2, 3));

  const client = await connect(t, gw, 'nell', 'phone');
  await expectWelcome(client, 1, 4);
  // Exactly msg 1..4: a gap, a repeat or a skipped seq fails.
  await expectMsgs(client, 1, 4, ids);
  assert.deepEqual(await readHistory(gw, 'nell', 2), { seqs: [1, 2, 3, 4], gaps: [] });
  assert.deepEqual(warned(lines, 'nell'), [[40, '0-1'], [40, '2-1']]);
});
