/**
 * docs/examples/pixiu-client.js and docs/protocol.md's "On 4002" rule 3, against a real
 * service and Redis (test/examples/browser-fixture.ts): a second 4002 within a minute
 * means another install has the device id — counting only the 4002s that the page's own
 * handshakes, given up on (point 9's connect timeout), do not explain. On a slow uplink
 * such a handshake reaches the node late, its FIN trailing the request, and closes the
 * page's newer connection 4002, once ("A handshake that never ends"): twice within a
 * minute made the page take a new device id (a phone churning ids and stored cursors:
 * walk10 F4). A real second tab of the same id still makes one of the two take a new one.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil, within } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { LateHandshakeProxy } from '../harness/late-handshake-proxy.js';
import { closes, MemoryStorage, opens, openPage, site, startSite, type Page } from './browser-fixture.js';

before(() => startSite(cleanupList()));
after(() => site.cleanup.run());

/** Posts one message to `user`. */
async function post(user: string): Promise<void> {
  const answer = await site.node.client.post('/v1/messages', { to: user, type: 'chat', data: {} });
  assert.equal(answer.status, 201, answer.text);
}

/** Resolves once `page` has a welcome on a connection other than the one whose conn is `not` (the conn is set by welcome). */
async function welcomedAnew(page: Page, not: string | undefined): Promise<string> {
  await waitUntil('a welcome on a new connection', async () => page.client.conn !== undefined && page.client.conn !== not, 15_000);
  return page.client.conn as string;
}

test('handshakes the page gave up on that reach the node late close its newer connection 4002, twice within a minute: the page keeps its device id', async (t) => {
  const proxy = await LateHandshakeProxy.start(Number(new URL(site.node.service.url).port));
  t.after(() => proxy.close());
  let held = proxy.hold(); // the page's first handshake
  const page = openPage(t, 'kim', { url: `ws://127.0.0.1:${proxy.port}/v1/connect`, connectTimeoutMs: 1000 });
  const device = page.client.device;
  let conn: string | undefined;
  for (let round = 1; round <= 2; round++) {
    await within(15_000, `round ${round}: the page gives the held handshake up`, held.givenUp);
    conn = await welcomedAnew(page, conn);
    const late = held;
    if (round === 1) held = proxy.hold(); // the page's reconnect after the 4002 to come
    // The node admits the late handshake (its FIN comes only after the node's answer): it replaces the page's connection.
    assert.equal(await within(5000, 'the node answers the late handshake', late.release()), 'HTTP/1.1 101 Switching Protocols');
    await waitUntil(`round ${round}: the page's connection closed 4002`, async () => closes(page).filter((c) => c?.code === 4002).length === round);
  }
  conn = await welcomedAnew(page, conn);
  assert.deepEqual(closes(page).map((c) => [c?.code, c?.reason]), [
    [1006, 'not open in time'], [4002, 'replaced by a new connection of the same device'],
    [1006, 'not open in time'], [4002, 'replaced by a new connection of the same device'],
  ]);
  assert.equal(page.client.device, device, 'two 4002s, each explained by a handshake the page gave up: the same device id');
  await post('kim');
  await waitUntil('the message, on the connection of the same device', async () => page.msgs.length === 1);
  assert.equal(opens(page), 3);
});

/**
 * Waits until one of two tabs of `user`'s `device` took a new device id, at its `nth` 4002; the
 * other keeps `device`, and a message posted then reaches both (each its own connection).
 */
async function parted(user: string, first: Page, copy: Page, device: string, nth: number, why: string): Promise<void> {
  await waitUntil('one of the tabs took a new device id', async () => first.client.device !== device || copy.client.device !== device, 20_000);
  const moved = first.client.device === device ? copy : first;
  const kept = moved === first ? copy : first;
  assert.equal(kept.client.device, device, 'the other keeps the id');
  assert.equal(closes(moved).filter((c) => c?.code === 4002).length, nth, why);
  await post(user);
  await waitUntil('both tabs show the message', async () => first.msgs.length === 1 && copy.msgs.length === 1, 15_000);
}

test('a duplicated tab (its sessionStorage copied, the same device id): the two close each other 4002 until one takes a new id, then both get messages', async (t) => {
  const first = openPage(t, 'lou');
  await waitUntil('the first tab open', async () => opens(first) === 1);
  const session = new MemoryStorage();
  session.setItem('pixiu.device', first.client.device);
  const copy = openPage(t, 'lou', { session });
  const device = first.client.device;
  assert.equal(copy.client.device, device);
  await parted('lou', first, copy, device, 2, 'a new id at the second 4002 within a minute');
});

test('a handshake given up explains one 4002, not more: duplicated tabs that each gave one up still part, one taking a new id at its third 4002', async (t) => {
  const proxy = await LateHandshakeProxy.start(Number(new URL(site.node.service.url).port));
  t.after(() => proxy.close());
  const url = `ws://127.0.0.1:${proxy.port}/v1/connect`;
  // Each tab's first handshake is held and never released: given up, it explains one 4002 of its tab.
  let held = proxy.hold();
  const first = openPage(t, 'max', { url, connectTimeoutMs: 1000 });
  await within(15_000, 'the first tab gives its first handshake up', held.givenUp);
  await welcomedAnew(first, undefined);
  const device = first.client.device;
  const session = new MemoryStorage();
  session.setItem('pixiu.device', device);
  held = proxy.hold();
  const copy = openPage(t, 'max', { url, connectTimeoutMs: 1000, session });
  await within(15_000, 'the copy gives its first handshake up', held.givenUp);
  await parted('max', first, copy, device, 3, 'one 4002 explained, a new id at the second of the others');
});
