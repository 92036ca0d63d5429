/**
 * A history answer its client does not take within `PIXIU_HISTORY_TAKE_TIMEOUT` closes its
 * connection (src/api/history-budget.ts, docs/api.md): a client that pipelines page
 * requests and never reads would otherwise hold the node's history budget for as long
 * as its connection stays open. Over a raw socket against the real service.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { HISTORY_BYTES_IN_FLIGHT } from '../../src/api/history-budget.js';
import { expectError, holdHistoryBudget, metricSample, waitUntil } from '../harness/checks.js';
import { cleanupList, startInProcessAlone, type InProcessServer } from '../harness/pixiu-server.js';

const files = cleanupList();
/** A node with the short {@link TAKE_TIMEOUT_MS}, which the tests of the timeout wait out. */
let server: InProcessServer;
/** A node with the long {@link PATIENT_TAKE_TIMEOUT_MS}, for what must happen well before it. */
let patient: InProcessServer;
const USER = 'hoarded';
/**
 * The users whose inboxes the hoarding client asks for, in turn: one user's answers
 * hold at most HISTORY_BYTES_PER_USER (8 MiB, about four such pages), less than
 * loopback's buffers take; across eight users the answers outgrow them.
 */
const USERS = [USER, ...Array.from({ length: 7 }, (_, i) => `${USER}-${i + 1}`)];
/** 40 messages of 60,000 characters to each user: a page of limit=1000 is 17 of them, about 1 MiB. */
const MESSAGES = 40;
const TAKE_TIMEOUT_MS = 1000;
/**
 * The take timeout of {@link patient}: what is given back "at once" (a close) is
 * told apart from what only the timeout gives back by tens of seconds, not by a
 * fraction of one that a loaded machine (test files in parallel on 2 cores) can eat up.
 */
const PATIENT_TAKE_TIMEOUT_MS = 30_000;

/** A node on a Redis of its own, with {@link MESSAGES} to each of {@link USERS}. */
async function loadedNode(takeTimeoutMs: number): Promise<InProcessServer> {
  // The 40 messages go in one batch of 2.4 MB: over the default body limit (1 MiB).
  const { server: node } = await startInProcessAlone(files, { partitions: '1', storeDurability: 'relaxed', historyTakeTimeoutMs: `${takeTimeoutMs}ms`, maxBodyBytes: String(4 * 1024 * 1024) });
  const messages = Array.from({ length: MESSAGES }, (_, i) => ({ to: USERS, type: 't', data: String(i).padStart(3, '0').repeat(20_000) }));
  const answer = await node.client.post('/v1/messages/batch', { messages });
  assert.equal(answer.status, 200, answer.text.slice(0, 500));
  return node;
}

before(async () => {
  [server, patient] = await Promise.all([loadedNode(TAKE_TIMEOUT_MS), loadedNode(PATIENT_TAKE_TIMEOUT_MS)]);
});

after(() => files.run());

/** pixiu_history_connections_closed_total of `node` now. */
async function closedForIt(node = server): Promise<number> {
  return metricSample((await node.client.get('/metrics')).text, 'pixiu_history_connections_closed_total') ?? 0;
}

/**
 * Opens a connection and pipelines `pages` requests for pages of about 1 MiB on it (of
 * {@link USERS} in turn), never reading the answers; resolves once the node holds some of them.
 */
async function hoard(pages: number, node = server): Promise<net.Socket> {
  const { hostname, port } = new URL(node.service.url);
  const socket = net.connect(Number(port), hostname);
  // Never read: the pages pile up in the kernel's buffers, then in the node.
  socket.pause();
  socket.on('error', () => {});
  const request = (user: string): string => `GET /v1/users/${user}/messages?limit=1000 HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${node.client.token}\r\n\r\n`;
  socket.write(Array.from({ length: pages }, (_, i) => request(USERS[i % USERS.length] as string)).join(''));
  await waitUntil('the pages are held', async () => node.service.app.historyBudget.inUse > 0, 5000, 10);
  return socket;
}

/** Asserts that a client reading its page of `node` is answered, and that the page gives back what it held. */
async function expectPageRead(node = server): Promise<void> {
  const page = await node.client.get(`/v1/users/${USER}/messages?limit=1000`);
  assert.equal(page.status, 200, page.text.slice(0, 300));
  assert.equal((page.body as { messages: unknown[] }).messages.length, 17);
  await waitUntil('the read page gave back what it held', async () => node.service.app.historyBudget.inUse === 0, 2000);
}

test('a connection whose history answers go untaken past the take timeout is closed, and what they held is given back', async () => {
  const budget = server.service.app.historyBudget;
  const abandonedBefore = await closedForIt();
  // 24 pages of about 1 MiB: more than loopback's buffers hold, within the 64 MiB budget.
  const socket = await hoard(24);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const heldAt = Date.now();
  await waitUntil('the node closed the connection and gave back what its answers held', async () => budget.inUse === 0, 10 * TAKE_TIMEOUT_MS, 20);
  // Held until the timeout (less the moments between the first hold and its sighting): the client took nothing.
  assert.ok(Date.now() - heldAt >= 0.8 * TAKE_TIMEOUT_MS, `given back ${Date.now() - heldAt} ms after it was held, before the timeout`);
  assert.equal(await closedForIt(), abandonedBefore + 1, 'one connection closed for it');
  socket.resume();
  await closed;
  // A client that reads its pages is answered as before, on the same budget.
  await expectPageRead();
  assert.equal(await closedForIt(), abandonedBefore + 1, 'a page taken in time closes nothing');
});

test('a client that closes its connection with pipelined history answers still queued gives back what they held at once', async () => {
  // On the node whose take timeout is 30 s: at once is within a sixth of it (a loaded
  // machine took 0.5 - 1 s), given back only by the timeout would be 30 s, never at all
  // (the close not seen) fails the wait at half of it.
  const budget = patient.service.app.historyBudget;
  const abandonedBefore = await closedForIt(patient);
  const socket = await hoard(24, patient);
  const closedAt = Date.now();
  socket.destroy();
  await waitUntil('the closed connection\'s answers gave back what they held', async () => budget.inUse === 0, PATIENT_TAKE_TIMEOUT_MS / 2, 20);
  assert.ok(Date.now() - closedAt < PATIENT_TAKE_TIMEOUT_MS / 6, `given back ${Date.now() - closedAt} ms after the close, not by the take timeout`);
  assert.equal(await closedForIt(patient), abandonedBefore, 'the node closed nothing itself');
  await expectPageRead(patient);
});

test('a page of a few messages holds what a few messages can be, not a full page: it is read while the budget is nearly full', async () => {
  const budget = server.service.app.historyBudget;
  await waitUntil('nothing held', async () => budget.inUse === 0, 5000);
  // Held from here, as answers not yet taken would: all but 512 KiB of the budget.
  const giveBack = holdHistoryBudget(budget, HISTORY_BYTES_IN_FLIGHT - 512 * 1024);
  try {
    // One message of at most 64 KiB (PIXIU_MAX_MESSAGE_BYTES) fits in what is left; a page of up to 1 MiB does not.
    const small = await server.client.get(`/v1/users/${USER}/messages?limit=1`);
    assert.equal(small.status, 200, small.text.slice(0, 300));
    assert.equal((small.body as { messages: unknown[] }).messages.length, 1);
    expectError(await server.client.get(`/v1/users/${USER}/messages?limit=1000`), 503, 'UNAVAILABLE', /busy sending history pages/);
  } finally {
    giveBack();
  }
});
