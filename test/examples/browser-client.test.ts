/**
 * docs/examples/pixiu-client.js, the browser client the docs link to, run as a page
 * would run it against a real service and Redis (test/examples/browser-fixture.ts):
 * the inbox, points 1-4 and 7-9 of docs/protocol.md's "A client in one screen".
 * Checked: live delivery and acks; a dropped connection and a node restart resumed
 * with nothing lost or repeated; a token refreshed past the first one's exp on the same
 * connection; a new tab's gap and reset; the trimmed gap after a reset shown for the
 * seqs the tab never had and not for those it had (a black-box tester's finding J); a
 * socket that never opens given up and backed off; and a slow link whose pong waits
 * behind a backlog not taken for a dead connection (a browser tester's findings F1,
 * F3, F5, F6, F7, F8, F9). Also "failing" only once no attempt has opened for
 * failingAfterMs, a stream that never goes quiet acked by time (walk18 F5 and its
 * ack note), and a burst acked once, after it (review34b F4). Broadcasts and
 * channels: browser-client-streams.test.ts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { waitUntil } from '../harness/checks.js';
import { Keys } from '../../src/redis/keys.js';
import { cleanupList, type CleanupContext } from '../harness/pixiu-server.js';
import { closes, link, MemoryStorage, opens, openPage, SETTINGS, site, startNode, startSite, type Page } from './browser-fixture.js';

before(() => startSite(cleanupList()));
after(() => site.cleanup.run());

/** Posts `count` messages to `user`. */
async function post(user: string, count: number, pad = 0): Promise<void> {
  for (let i = 0; i < count; i++) {
    const answer = await site.node.client.post('/v1/messages', { to: user, type: 'chat', data: { i, pad: 'x'.repeat(pad) } });
    assert.equal(answer.status, 201, answer.text);
  }
}

/** Asserts the page showed seqs 1..n, in order, each message once. */
function shownOnce(page: Page, n: number): void {
  assert.deepEqual(page.msgs.map((m) => m.seq), Array.from({ length: n }, (_, i) => i + 1));
  assert.equal(new Set(page.msgs.map((m) => m.id)).size, n);
}

test('live messages are shown once each, in order, and acked: the node stores the device\'s cursor', async (t) => {
  const page = openPage(t, 'ann');
  await waitUntil('open', async () => opens(page) === 1);
  await post('ann', 3);
  await waitUntil('3 messages', async () => page.msgs.length === 3);
  shownOnce(page, 3);
  await waitUntil('the ack stored', async () => (await site.inbox.cursors('ann'))[page.client.device] === 3);
  assert.equal(page.client.lastSeq, 3);
});

test('a dropped connection (1006) and a node restart (1001): the page reconnects with its last_seq and shows every message once', async (t) => {
  const page = openPage(t, 'bob');
  await waitUntil('open', async () => opens(page) === 1);
  await post('bob', 4);
  await waitUntil('4 messages', async () => page.msgs.length === 4);
  // The network drops the connection: no close frame.
  site.serverSockets.at(-1)?.destroy();
  await post('bob', 4);
  await waitUntil('reconnected, 8 messages', async () => opens(page) === 2 && page.msgs.length === 8, 10_000);
  assert.deepEqual(closes(page)[0], { code: 1006, reason: '', opened: true });
  const port = new URL(site.node.service.url).port;
  await site.node.service.close();
  await startNode(port);
  await post('bob', 4);
  await waitUntil('back on the new node, 12 messages', async () => opens(page) >= 3 && page.msgs.length === 12, 15_000);
  assert.deepEqual(closes(page)[1], { code: 1001, reason: 'server shutting down', opened: true });
  shownOnce(page, 12);
});

test('a stream that never goes quiet is acked every 2 s, not only every 50 messages or after a quiet spell: the ack timeout (10 s) counts time (walk18)', async (t) => {
  const page = openPage(t, 'dan');
  await waitUntil('open', async () => opens(page) === 1);
  // A message every 100 ms for 3.5 s: never the 200 ms quiet spell, never 50 unacked.
  let stored = 0;
  for (let i = 0; i < 35; i++) {
    await post('dan', 1);
    stored = Math.max(stored, (await site.inbox.cursors('dan'))[page.client.device] ?? 0);
    await delay(100);
  }
  assert.ok(stored >= 10, `acked while the stream went on (stored cursor ${stored})`);
  await waitUntil('all 35, acked', async () => page.msgs.length === 35 && (await site.inbox.cursors('dan'))[page.client.device] === 35);
});

test('a burst is acked once, after it: its first message is not acked alone, on a new connection nor after 2 s of quiet (the 2 s count from the first unacked message: review34b F4)', async (t) => {
  const page = openPage(t, 'flo');
  await waitUntil('open', async () => opens(page) === 1);
  // The acks the page sends, read on its socket (the example's own `ws`).
  const acks: number[] = [];
  const ws = (page.client as unknown as { ws: { send(data: string): void } }).ws;
  const send = ws.send.bind(ws);
  ws.send = (data) => {
    const f = JSON.parse(data) as { t: string; seq?: number };
    if (f.t === 'ack') acks.push(f.seq as number);
    send(data);
  };
  /** Posts `n` messages in one batch: they come within the quiet spell (200 ms). */
  const burst = async (n: number): Promise<void> => {
    const answer = await site.node.client.post('/v1/messages/batch', { messages: Array.from({ length: n }, (_, i) => ({ to: 'flo', type: 'chat', data: { i } })) });
    assert.equal(answer.status, 200, answer.text);
  };
  // A page open for over 2 s (performance.now() counts from its load: here, the process's start).
  await delay(Math.max(0, 2100 - performance.now()));
  await burst(3);
  await waitUntil('3 messages, acked', async () => page.msgs.length === 3 && acks.includes(3));
  assert.deepEqual(acks, [3], 'the first burst of the connection is acked once');
  // 2 s of quiet is what is tested: a fixed wait.
  await delay(2100);
  await burst(3);
  await waitUntil('6 messages, acked', async () => page.msgs.length === 6 && acks.includes(6));
  assert.deepEqual(acks, [3, 6], 'a burst after 2 s of quiet is acked once');
  shownOnce(page, 6);
});

test('the token is refreshed by its lifetime (exp - iat): the connection outlives the first token\'s exp, with no 4001', async (t) => {
  const page = openPage(t, 'cat', { ttlSec: 4 });
  await waitUntil('open', async () => opens(page) === 1);
  const firstExpMs = Date.now() + 4000;
  // Due at half of 4 s (the minute before exp comes sooner): a new token every 2 s, each sent as a refresh.
  await waitUntil('a fourth token', async () => page.tokens >= 4, 15_000);
  assert.ok(Date.now() > firstExpMs, 'past the first token\'s exp');
  await post('cat', 1);
  await waitUntil('the message', async () => page.msgs.length === 1);
  assert.deepEqual(page.statuses.map(([s]) => s), ['open'], 'no close, no error frame');
});

/** The epoch of `user`'s inbox (the history route names it). */
async function epochOf(user: string): Promise<string> {
  return ((await site.node.client.get(`/v1/users/${user}/messages?after_seq=0&limit=1`)).body as { epoch: string }).epoch;
}

/** A new tab of a browser whose tabs left `user`'s seed at `lastSeq` under `epoch`. */
function seededTab(t: CleanupContext, user: string, lastSeq: number, epoch: string): Page {
  const local = new MemoryStorage();
  local.setItem(`pixiu.cursor.${user}`, JSON.stringify({ lastSeq, epoch }));
  return openPage(t, user, { local });
}

test('a new tab starts from the browser\'s seed: behind the inbox, a trimmed gap; ahead of it, a reset shown as nothing', async (t) => {
  await post('eve', 25); // the cap (20) keeps seqs 6..25
  const epoch = await epochOf('eve');
  const late = seededTab(t, 'eve', 2, epoch);
  await waitUntil('20 messages', async () => late.msgs.length === 20);
  assert.deepEqual(late.gaps, [{ from: 3, to: 5, reason: 'trimmed' }]);
  assert.deepEqual(late.msgs.map((m) => m.seq), Array.from({ length: 20 }, (_, i) => i + 6));
  late.client.stop();
  // A seed above the inbox's latest under its own epoch: the inbox gets a new epoch, and the tab a reset.
  const reset = seededTab(t, 'eve', 30, epoch);
  await waitUntil('20 messages again', async () => reset.msgs.length === 20 && reset.client.lastSeq === 25);
  assert.deepEqual(reset.gaps, [], 'the trimmed gap after the reset is of seqs the tab had (marked redelivered): no news');
  assert.notEqual(reset.client.epoch, epoch);
});

test('after a rotation that keeps the numbering, a tab behind the cap is told the seqs it never had, not those up to its last_seq (finding J)', async (t) => {
  await post('ivy', 25); // the cap (20) keeps seqs 6..25
  const epoch = await epochOf('ivy');
  // Another tab's seed above the latest: a new epoch, seqs going on.
  const rotating = seededTab(t, 'ivy', 30, epoch);
  await waitUntil('20 messages', async () => rotating.msgs.length === 20 && rotating.client.lastSeq === 25);
  rotating.client.stop();
  const late = seededTab(t, 'ivy', 2, epoch);
  await waitUntil('20 messages', async () => late.msgs.length === 20 && late.client.lastSeq === 25);
  assert.notEqual(late.client.epoch, epoch);
  assert.deepEqual(late.gaps, [{ from: 3, to: 5, reason: 'trimmed' }], 'as without the rotation');
});

test('an inbox Redis lost, refilled past the cap: the reset\'s trimmed gap is shown, as those seqs are new messages (finding J)', async (t) => {
  const page = openPage(t, 'jay');
  await waitUntil('open', async () => opens(page) === 1);
  await post('jay', 3);
  await waitUntil('3 messages, acked', async () => page.msgs.length === 3 && (await site.inbox.cursors('jay'))[page.client.device] === 3);
  page.client.stop();
  const keys = new Keys(SETTINGS.redisPrefix).user('jay');
  await site.raw.del(keys.inbox, keys.meta, keys.ids, keys.acks);
  await post('jay', 25); // a new epoch from seq 1; the cap keeps 6..25
  page.client.start();
  await waitUntil('the 20 retained new messages', async () => page.msgs.length === 23 && page.client.lastSeq === 25);
  assert.deepEqual(page.gaps, [{ from: 1, to: 5, reason: 'trimmed' }]);
});

test('a socket that does not open within the connect timeout is given up and retried with the back-off; "failing" (and a fresh token, once) only when none has opened for failingAfterMs, not at the third attempt (walk18 F5)', async (t) => {
  const silent = net.createServer(() => undefined); // accepts, never answers the handshake
  const accepted: net.Socket[] = [];
  silent.on('connection', (s) => {
    s.resume();
    accepted.push(s);
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  site.cleanup.after(() => new Promise((resolve) => silent.close(resolve)));
  const { port } = silent.address() as net.AddressInfo;
  const url = `ws://127.0.0.1:${port}/v1/connect`;
  // A restart's few seconds of failed attempts (the default 30 s not reached) say nothing; a longer spell says "failing" once.
  const restart = openPage(t, 'fay', { url, connectTimeoutMs: 300 });
  const long = openPage(t, 'fay', { url, connectTimeoutMs: 300, failingAfterMs: 1500 });
  await waitUntil('five attempts each', async () => closes(restart).length >= 5 && closes(long).length >= 5, 20_000);
  restart.client.stop();
  long.client.stop();
  for (const page of [restart, long]) {
    assert.deepEqual(closes(page).slice(0, 5), Array.from({ length: 5 }, () => ({ code: 1006, reason: 'not open in time', opened: false })));
  }
  assert.equal(restart.statuses.filter(([s]) => s === 'failing').length, 0, 'no "failing" within failingAfterMs');
  assert.equal(restart.tokens, 1);
  assert.equal(long.statuses.filter(([s]) => s === 'failing').length, 1, '"failing" once in the spell');
  assert.equal(long.tokens, 2, 'a fresh token once, when it said "failing"');
  await waitUntil('every attempt\'s socket closed by the page', async () => accepted.length >= 10 && accepted.every((s) => s.destroyed));
});

test('two tabs of one browser: a tab that lost its connection resumes from its own last_seq, not the newer one the other tab left in localStorage', async (t) => {
  const local = new MemoryStorage();
  const network = await link(t);
  const tab1 = openPage(t, 'hal', { local, url: network.url });
  const tab2 = openPage(t, 'hal', { local });
  await waitUntil('both open', async () => opens(tab1) === 1 && opens(tab2) === 1);
  await post('hal', 2);
  await waitUntil('both show 2', async () => tab1.msgs.length === 2 && tab2.msgs.length === 2);
  network.down();
  await waitUntil('tab 1 lost its connection', async () => closes(tab1).length === 1);
  await post('hal', 2);
  await waitUntil('tab 2 shows 4 and leaves seq 4 in localStorage', async () =>
    tab2.msgs.length === 4 && (JSON.parse(local.getItem('pixiu.cursor.hal') ?? '{}') as { lastSeq?: number }).lastSeq === 4);
  network.up();
  await waitUntil('tab 1 back, with the 2 it missed', async () => tab1.msgs.length === 4, 15_000);
  shownOnce(tab1, 4);
  shownOnce(tab2, 4);
});

test('on a slow link the pong waits behind a backlog for longer than the deadline: frames arriving keep the connection, and the page shows it all on one connection', async (t) => {
  await post('gus', 20, 30_000); // 600 KB
  // 100 KB/s: a 30 KB frame every 0.3 s, the pong of a ping sent during the backlog seconds behind it.
  const network = await link(t, 100_000);
  const page = openPage(t, 'gus', { url: network.url, quietMs: 150, deadlineMs: 800 });
  await waitUntil('20 messages', async () => page.msgs.length === 20, 20_000);
  shownOnce(page, 20);
  assert.deepEqual(page.statuses.map(([s]) => s), ['open'], 'never dropped for a missing pong');
});
