/**
 * docs/examples/pixiu-client.js's broadcasts and channels (points 5 and 6 of
 * docs/protocol.md's "A client in one screen"; a black-box tester building live events
 * found no example of them, walk8 F5), run as a page would run it against a real
 * service and Redis (test/examples/browser-fixture.ts). Checked: broadcasts shown live
 * and, after a reconnect, those posted while away, from the tab's last_bseq, none
 * twice; a new tab starting from the last_bseq the browser's tabs left; the broadcasts
 * trimmed past the stream's cap while away told as a gap; a lost broadcast stream told
 * as a reset, a broadcast published again into the new one not shown twice; a
 * channel's publications shown live and, after each reconnect, those published while
 * away (the sub sent again from the subscribed frame's since, then from the last pub's
 * id); the publications trimmed past a channel's history while away told as a channel
 * gap; 100 channels followed in groups of subs, never 4003.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { Keys } from '../../src/redis/keys.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { closes, link, MemoryStorage, opens, openPage, SETTINGS, site, startSite } from './browser-fixture.js';

before(() => startSite(cleanupList()));
after(() => site.cleanup.run());

/** What POST /v1/broadcast answers. */
interface Posted { id: string; bseq: string }

/** Posts `count` broadcasts to everyone (each with `client_msg_id` `${key}-${i}` when `key` is given), one after the other. */
async function broadcast(count: number, key?: string): Promise<Posted[]> {
  const posted: Posted[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await site.node.client.post('/v1/broadcast', { type: 'news', data: { i }, ...(key === undefined ? {} : { client_msg_id: `${key}-${i}` }) });
    assert.ok(answer.status === 201 || answer.status === 200, answer.text);
    posted.push(answer.body as Posted);
  }
  return posted;
}

/** Publishes `count` publications on `channel`, one after the other; their ids. */
async function publish(channel: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await site.node.client.post(`/v1/channels/${channel}/publish`, { type: 'chat', data: { i } });
    assert.equal(answer.status, 201, answer.text);
    ids.push((answer.body as { id: string }).id);
  }
  return ids;
}

test('broadcasts are shown live, and after a reconnect those posted while the page was away come from its last_bseq, none twice', async (t) => {
  const network = await link(t);
  const page = openPage(t, 'kim', { url: network.url });
  await waitUntil('open', async () => opens(page) === 1);
  const live = await broadcast(2);
  await waitUntil('2 broadcasts', async () => page.bcasts.length === 2);
  assert.equal(page.client.lastBseq, live[1]?.bseq, 'last_bseq is the last bcast\'s');
  network.down();
  await waitUntil('the connection lost', async () => closes(page).length === 1);
  const away = await broadcast(2);
  network.up();
  await waitUntil('back, with the 2 posted while away', async () => page.bcasts.length === 4, 15_000);
  const after = await broadcast(1);
  await waitUntil('the live one after', async () => page.bcasts.length === 5);
  assert.deepEqual(page.bcasts.map((b) => b.id), [...live, ...away, ...after].map((b) => b.id));
  assert.deepEqual(page.gaps, []);
  assert.equal(opens(page), 2);
});

test('broadcasts trimmed past the stream\'s cap while the page was away reach onGap as a broadcast gap, then the retained ones are shown', async (t) => {
  const network = await link(t);
  const page = openPage(t, 'lin', { url: network.url });
  await waitUntil('open', async () => opens(page) === 1);
  const [seen] = await broadcast(1) as [Posted];
  await waitUntil('the broadcast', async () => page.bcasts.length === 1);
  network.down();
  await waitUntil('the connection lost', async () => closes(page).length === 1);
  const away = await broadcast(8); // the cap (5) keeps the last 5
  const kept = away.slice(3);
  network.up();
  await waitUntil('back, with the 5 retained', async () => page.bcasts.length === 6, 15_000);
  assert.deepEqual(page.gaps, [{ stream: 'broadcast', from: seen.bseq, to: kept[0]?.bseq }]);
  assert.deepEqual(page.bcasts.map((b) => b.id), [seen, ...kept].map((b) => b.id));
});

test('a broadcast stream lost while the page was away reaches onGap as a reset; a broadcast published again into the new stream is not shown twice', async (t) => {
  const network = await link(t);
  const page = openPage(t, 'max', { url: network.url });
  await waitUntil('open', async () => opens(page) === 1);
  const [first] = await broadcast(1, 'max-retried') as [Posted];
  await waitUntil('the broadcast', async () => page.bcasts.length === 1);
  network.down();
  await waitUntil('the connection lost', async () => closes(page).length === 1);
  // Redis loses the stream and the broadcast's retry marker (as a FLUSHALL would); then a
  // new broadcast, and the producer's retry of the first, which the new stream takes again.
  const keys = new Keys(SETTINGS.redisPrefix);
  await site.raw.del(keys.broadcast(), keys.broadcastMarker(first.id));
  const [fresh] = await broadcast(1) as [Posted];
  const [again] = await broadcast(1, 'max-retried') as [Posted];
  assert.equal(again.id, first.id);
  assert.notEqual(again.bseq, first.bseq);
  network.up();
  await waitUntil('back, the new stream read to its end', async () => page.client.lastBseq === again.bseq, 15_000);
  assert.deepEqual(page.gaps, [{ stream: 'broadcast', reset: true, from: first.bseq }]);
  assert.deepEqual(page.bcasts.map((b) => b.id), [first.id, fresh.id], 'the first not shown again');
});

test('a channel\'s publications are shown live, and after each reconnect those published while away: the sub is sent again from where the channel got to', async (t) => {
  const network = await link(t);
  const page = openPage(t, 'ned', { url: network.url, channels: ['live.*.chat'] });
  await waitUntil('open', async () => opens(page) === 1);
  page.client.subscribe('live.s1.chat');
  await waitUntil('subscribed', async () => typeof page.client.channels.get('live.s1.chat')?.since === 'string');
  const away = async (count: number): Promise<string[]> => {
    network.down();
    await waitUntil('the connection lost', async () => closes(page).length === opens(page));
    const ids = await publish('live.s1.chat', count);
    network.up();
    return ids;
  };
  // Away before any pub: the sub again with the subscribed frame's since.
  const first = await away(2);
  await waitUntil('back, with the 2 published while away', async () => page.pubs.length === 2, 15_000);
  const live = await publish('live.s1.chat', 2);
  await waitUntil('2 live', async () => page.pubs.length === 4);
  // Away after pubs: the sub again with the last one's id.
  const second = await away(2);
  await waitUntil('back again, with the 2 published while away', async () => page.pubs.length === 6, 15_000);
  const after = await publish('live.s1.chat', 1);
  await waitUntil('1 live', async () => page.pubs.length === 7);
  assert.deepEqual(page.pubs.map((p) => p.id), [...first, ...live, ...second, ...after]);
  assert.ok(page.pubs.every((p) => p.channel === 'live.s1.chat'));
  assert.equal(opens(page), 3);
});

test('a channel\'s publications trimmed past its history while the page was away reach onGap as a channel gap, then the retained ones are shown', async (t) => {
  const network = await link(t);
  const page = openPage(t, 'tia', { url: network.url, channels: ['live.*.chat'] });
  await waitUntil('open', async () => opens(page) === 1);
  page.client.subscribe('live.s2.chat');
  await waitUntil('subscribed', async () => typeof page.client.channels.get('live.s2.chat')?.since === 'string');
  const [seen] = await publish('live.s2.chat', 1) as [string];
  await waitUntil('shown', async () => page.pubs.length === 1);
  network.down();
  await waitUntil('the connection lost', async () => closes(page).length === opens(page));
  // 7 while away: the history (SETTINGS, 5) keeps the last 5.
  const away = await publish('live.s2.chat', 7);
  network.up();
  await waitUntil('back, with the 5 retained', async () => page.pubs.length === 6, 15_000);
  assert.deepEqual(page.gaps, [{ stream: 'channel', channel: 'live.s2.chat', from: seen, to: away[2] }]);
  assert.deepEqual(page.pubs.map((p) => p.id), [seen, ...away.slice(2)]);
});

test('a new tab starts its broadcasts from the last_bseq the browser\'s tabs left in localStorage: it shows those posted since', async (t) => {
  const local = new MemoryStorage();
  const tab1 = openPage(t, 'ora', { local });
  await waitUntil('open', async () => opens(tab1) === 1);
  const [seen] = await broadcast(1) as [Posted];
  await waitUntil('shown, and its bseq in localStorage', async () =>
    tab1.bcasts.length === 1 && (JSON.parse(local.getItem('pixiu.cursor.ora') ?? '{}') as { lastBseq?: string }).lastBseq === seen.bseq);
  tab1.client.stop();
  const since = await broadcast(2);
  const tab2 = openPage(t, 'ora', { local });
  await waitUntil('the 2 posted since', async () => tab2.bcasts.length === 2);
  assert.deepEqual(tab2.bcasts.map((b) => b.id), since.map((b) => b.id));
});

test('following 100 channels: the subs go in groups with a ping after each, on the first connection and again after a reconnect, never 4003', async (t) => {
  const network = await link(t);
  const page = openPage(t, 'pat', { url: network.url, channels: ['many.*'] });
  const names = Array.from({ length: 100 }, (_, i) => `many.c${i}`);
  for (const name of names) page.client.subscribe(name);
  const allSubscribed = async (): Promise<boolean> => names.every((name) => typeof page.client.channels.get(name)?.since === 'string');
  await waitUntil('100 subscribed', allSubscribed, 15_000);
  network.down();
  await waitUntil('the connection lost', async () => closes(page).length === 1);
  const ids = await publish('many.c99', 1);
  network.up();
  await waitUntil('back, with the publication on the last channel', async () => page.pubs.length === 1, 15_000);
  assert.deepEqual(page.pubs.map((p) => p.id), ids);
  assert.deepEqual(closes(page).map((d) => d?.code), [1006], 'no 4003');
});
