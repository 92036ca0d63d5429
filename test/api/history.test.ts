/**
 * Page sizes of the history routes (DESIGN.md §7, docs/api.md): `GET
 * /v1/users/{uid}/messages` and its client twin `GET /v1/me/messages` return 100
 * messages when `limit` is not given, and take `limit` up to 1,000 — against the real
 * service on a real port and a private redis-server, with more messages than either. A
 * page of large messages ends at 1 MiB of data, and `next_after_seq` goes on from there.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { MAX_PAGE_DATA_CHARS } from '../../src/api/history.js';
import { HISTORY_BYTES_IN_FLIGHT, HISTORY_BYTES_PER_USER } from '../../src/api/history-budget.js';
import { MAX_BATCH } from '../../src/api/routes/message-schemas.js';
import { expectError, holdHistoryBudget, waitUntil } from '../harness/checks.js';
import { PixiuClient, cleanupList, startInProcess, type HttpAnswer, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';

const JWT_SECRET = 'history-tests-hs256-secret-of-32-chars-or-more';
/** One more than the largest page, so that no page can hold them all. */
const MESSAGES = 1001;
const USER = 'hal';

interface Page {
  user: string;
  latest_seq: number;
  messages: Array<{ seq: number; data: unknown }>;
  gaps: unknown[];
  next_after_seq: number;
}

let api: PixiuClient;
let server: InProcessServer;
/** As {@link USER}, with a client JWT. */
let me: PixiuClient;
/** The service's Redis, for what an operator or eviction does by hand (XDEL, DEL). */
let raw: Redis;
const files = cleanupList();
/** Largest message the service takes: over one page's data, so that one message can fill a page alone. */
const MAX_MESSAGE_BYTES = 2 * MAX_PAGE_DATA_CHARS;

before(async () => {
  const redis = await RedisServer.start();
  // Registered first, so it runs last, and runs even when an earlier step fails.
  files.after(() => redis.destroy());
  raw = new Redis(redis.url);
  files.after(() => raw.disconnect());
  // A body holds a message of the limit and its envelope: over the default body limit (1 MiB).
  server = await startInProcess(files, { redisUrl: redis.url, jwtSecret: JWT_SECRET, maxMessageBytes: String(MAX_MESSAGE_BYTES), maxBodyBytes: String(2 * MAX_MESSAGE_BYTES) });
  api = server.client;
  me = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, USER));
  // Posted with the batch route, in as few requests as it takes.
  for (let first = 0; first < MESSAGES; first += MAX_BATCH) {
    const count = Math.min(MAX_BATCH, MESSAGES - first);
    const messages = Array.from({ length: count }, (_, k) => ({ to: USER, type: 't', data: { i: first + k } }));
    const answer = await api.post('/v1/messages/batch', { messages });
    assert.equal(answer.status, 200, answer.text);
    const results = (answer.body as { results: Array<{ status: number }> }).results;
    assert.deepEqual(results.map((r) => r.status), new Array<number>(count).fill(201));
  }
});

after(() => files.run());

/** Asserts a 200 page holding exactly seqs `from`..`to`, in order, each with its data. */
function expectPage(answer: HttpAnswer, from: number, to: number): void {
  assert.equal(answer.status, 200, answer.text.slice(0, 500));
  const page = answer.body as Page;
  assert.equal(page.user, USER);
  assert.equal(page.latest_seq, MESSAGES);
  assert.deepEqual(page.gaps, []);
  const seqs = Array.from({ length: to - from + 1 }, (_, k) => from + k);
  assert.equal(page.messages.length, seqs.length, 'messages on the page');
  assert.deepEqual(page.messages.map((m) => m.seq), seqs);
  assert.deepEqual(page.messages.map((m) => m.data), seqs.map((seq) => ({ i: seq - 1 })));
  assert.equal(page.next_after_seq, to);
}

test('GET /v1/users/{uid}/messages without limit answers exactly 100 messages, the oldest first', async () => {
  expectPage(await api.get(`/v1/users/${USER}/messages`), 1, 100);
  expectPage(await api.get(`/v1/users/${USER}/messages?after_seq=100`), 101, 200);
});

test('GET /v1/users/{uid}/messages takes limit=1000 (exactly 1000 of 1001), and refuses limit=1001', async () => {
  expectPage(await api.get(`/v1/users/${USER}/messages?limit=1000`), 1, 1000);
  expectPage(await api.get(`/v1/users/${USER}/messages?after_seq=1000&limit=1000`), 1001, 1001);
  expectError(await api.get(`/v1/users/${USER}/messages?limit=1001`), 400, 'INVALID_REQUEST', /limit/);
});

test('GET /v1/me/messages has the same page sizes: 100 without limit, 1000 with limit=1000', async () => {
  expectPage(await me.get('/v1/me/messages'), 1, 100);
  expectPage(await me.get('/v1/me/messages?limit=1000'), 1, 1000);
  expectError(await me.get('/v1/me/messages?limit=1001'), 400, 'INVALID_REQUEST', /limit/);
});

/** Posts one message to `user` for each of `data`, in one batch; their seqs are 1 to `data.length`. */
async function postData(user: string, data: unknown[]): Promise<void> {
  const answer = await api.post('/v1/messages/batch', { messages: data.map((d) => ({ to: user, type: 't', data: d })) });
  assert.equal(answer.status, 200, answer.text.slice(0, 500));
  assert.deepEqual((answer.body as { results: Array<{ status: number }> }).results.map((r) => r.status), data.map(() => 201));
}

/** The pages of `user`'s inbox from the start, each read with limit=1000 from the last's next_after_seq, until `latest` (at most 10 reads). */
async function readToEnd(user: string, latest: number): Promise<Page[]> {
  const pages: Page[] = [];
  let after = 0;
  for (let reads = 0; after < latest && reads < 10; reads++) {
    const page = await api.get(`/v1/users/${user}/messages?after_seq=${after}&limit=1000`);
    assert.equal(page.status, 200, page.text.slice(0, 500));
    pages.push(page.body as Page);
    after = (page.body as Page).next_after_seq;
  }
  return pages;
}

test('a page of large messages ends before 1 MiB of data, whatever the limit; next_after_seq reads on to the end, each message once', async () => {
  // 40 messages of 60,000 characters: 17 fit in 1 MiB, where limit=1000 would take all 40.
  const user = 'heavy';
  const text = (i: number): string => String(i).padStart(3, '0').repeat(20_000);
  await postData(user, Array.from({ length: 40 }, (_, i) => text(i)));
  const pages = await readToEnd(user, 40);
  assert.deepEqual(pages.map((p) => p.messages.length), [17, 17, 6]);
  for (const page of pages) {
    assert.ok(page.messages.reduce((n, m) => n + JSON.stringify(m.data).length, 0) <= MAX_PAGE_DATA_CHARS);
    assert.equal(page.next_after_seq, page.messages.at(-1)?.seq);
    assert.deepEqual(page.gaps, []);
    assert.equal(page.latest_seq, 40);
  }
  const read = pages.flatMap((p) => p.messages);
  assert.deepEqual(read.map((m) => m.seq), Array.from({ length: 40 }, (_, i) => i + 1));
  assert.deepEqual(read.map((m) => m.data), Array.from({ length: 40 }, (_, i) => text(i)));
});

test('data of exactly 1 MiB fills one page (the cut is past 1 MiB, not at it), and one message larger than 1 MiB is a page of its own', async () => {
  // 34 strings of 32,766 characters: 32,768 characters of JSON each, 32 of them exactly MAX_PAGE_DATA_CHARS.
  const exact = (i: number): string => String.fromCharCode(97 + (i % 26)).repeat(32_766);
  await postData('exact', Array.from({ length: 34 }, (_, i) => exact(i)));
  assert.equal(32 * JSON.stringify(exact(0)).length, MAX_PAGE_DATA_CHARS);
  const pages = await readToEnd('exact', 34);
  assert.deepEqual(pages.map((p) => [p.messages.length, p.next_after_seq]), [[32, 32], [2, 34]]);
  assert.deepEqual(pages.flatMap((p) => p.messages.map((m) => m.data)), Array.from({ length: 34 }, (_, i) => exact(i)));
  // A message whose data alone passes 1 MiB is still read, alone: an empty page would
  // leave next_after_seq where it was, and a reader going on from it would never end.
  const huge = 'h'.repeat(MAX_PAGE_DATA_CHARS + 1000);
  await postData('huge', [huge, 'small']);
  const alone = await readToEnd('huge', 2);
  assert.deepEqual(alone.map((p) => [p.messages.map((m) => m.seq), p.next_after_seq]), [[[1], 1], [[2], 2]]);
  assert.equal(alone[0]?.messages[0]?.data, huge);
});

test('an inbox whose stream is gone while its counter remains (a key evicted) is one gap up to latest_seq, and next_after_seq goes on to it', async () => {
  await postData('evicted', [1, 2, 3]);
  assert.equal(await raw.del('px:{evicted}:inbox'), 1);
  for (const after of [0, 1]) {
    const page = await api.get(`/v1/users/evicted/messages?after_seq=${after}`);
    assert.equal(page.status, 200, page.text);
    const { epoch: _epoch, ...rest } = page.body as Page & { epoch: unknown };
    assert.deepEqual(rest, { user: 'evicted', first_seq: 4, latest_seq: 3, messages: [], gaps: [{ from: after + 1, to: 3, reason: 'trimmed' }], next_after_seq: 3 }, `after_seq=${after}`);
  }
});

test('history answers share the node\'s budget: past it both routes answer 503 UNAVAILABLE with Retry-After, read nothing, and answer again once it is given back', async () => {
  // What the budget holds for answers not yet taken by their clients, filled from here
  // (src/api/history-budget.ts).
  const budget = server.service.app.historyBudget;
  const giveBack = holdHistoryBudget(budget, HISTORY_BYTES_IN_FLIGHT);
  for (const answer of [await api.get(`/v1/users/${USER}/messages?limit=1`), await me.get('/v1/me/messages?limit=1')]) {
    expectError(answer, 503, 'UNAVAILABLE', /busy sending history pages/);
    assert.equal(answer.headers.get('retry-after'), '1');
  }
  giveBack();
  await waitUntil('the refused answers gave back what they held', async () => budget.inUse === 0, 2000);
  expectPage(await api.get(`/v1/users/${USER}/messages?limit=1`), 1, 1);
  expectPage(await me.get('/v1/me/messages?limit=1'), 1, 1);
  await waitUntil('the answers gave back what they held', async () => budget.inUse === 0, 2000);
});

test('one user\'s history answers hold at most their share of the budget: past it both routes answer that user 429 RATE_LIMITED with Retry-After and read nothing, while another user\'s page is read', async () => {
  const budget = server.service.app.historyBudget;
  // Answers for USER's inbox, not yet taken, hold all but 1 MiB of the user's share: a page of limit=1000 (2 MiB) is past it.
  const giveBack = holdHistoryBudget(budget, HISTORY_BYTES_PER_USER - 1024 * 1024, USER);
  for (const answer of [await api.get(`/v1/users/${USER}/messages?limit=1000`), await me.get('/v1/me/messages?limit=1000')]) {
    expectError(answer, 429, 'RATE_LIMITED', new RegExp(`^user ${USER} has 1 history request in flight on this node, holding 7 MiB of the 8 MiB one user's may hold: each holds what its page could come to \\(this one: 2\\.19 MiB\\).*send them one at a time, reading each answer before asking for the next`));
    // "retry shortly" says when: RFC 6585 §4 (a contract tester's finding: none was sent).
    assert.equal(answer.headers.get('retry-after'), '1');
  }
  // Another user's page is read whatever USER holds.
  const other = await api.get('/v1/users/someone-else/messages?limit=1000');
  assert.equal(other.status, 200, other.text);
  giveBack();
  await waitUntil('the answers gave back what they held', async () => budget.inUse === 0, 2000);
  const again = await me.get('/v1/me/messages?limit=1000');
  assert.equal(again.status, 200, again.text.slice(0, 300));
});

test('seqs deleted by hand (XDEL) in the middle or at the end of an inbox are gaps, and next_after_seq reads past them to latest_seq', async () => {
  const post = async (user: string, n: number): Promise<void> => {
    for (let i = 1; i <= n; i++) assert.equal((await api.post('/v1/messages', { to: user, type: 't', data: i })).status, 201);
  };
  const page = async (user: string, after: number, limit = 100): Promise<{ seqs: number[]; gaps: unknown[]; next: number }> => {
    const answer = await api.get(`/v1/users/${user}/messages?after_seq=${after}&limit=${limit}`);
    assert.equal(answer.status, 200, answer.text);
    const body = answer.body as Page;
    assert.equal(body.latest_seq, user === 'holey' ? 6 : 3);
    return { seqs: body.messages.map((m) => m.seq), gaps: body.gaps, next: body.next_after_seq };
  };
  await post('holey', 6);
  assert.equal(await raw.xdel('px:{holey}:inbox', '2-0', '3-0', '6-0'), 3);
  assert.deepEqual(await page('holey', 0), { seqs: [1, 4, 5], gaps: [{ from: 2, to: 3, reason: 'trimmed' }, { from: 6, to: 6, reason: 'trimmed' }], next: 6 });
  // A page that ends at its limit says nothing of what lies past it.
  assert.deepEqual(await page('holey', 0, 2), { seqs: [1, 4], gaps: [{ from: 2, to: 3, reason: 'trimmed' }], next: 4 });
  assert.deepEqual(await page('holey', 4, 1), { seqs: [5], gaps: [], next: 5 });
  assert.deepEqual(await page('holey', 5), { seqs: [], gaps: [{ from: 6, to: 6, reason: 'trimmed' }], next: 6 });
  // The end deleted: a reader that follows next_after_seq gets there, not stuck at 1.
  await post('tailless', 3);
  assert.equal(await raw.xdel('px:{tailless}:inbox', '2-0', '3-0'), 2);
  assert.deepEqual(await page('tailless', 0), { seqs: [1], gaps: [{ from: 2, to: 3, reason: 'trimmed' }], next: 3 });
  assert.deepEqual(await page('tailless', 1), { seqs: [], gaps: [{ from: 2, to: 3, reason: 'trimmed' }], next: 3 });
});

test('a page lists a run deleted by hand (trimmed) and the expired run right after it as two gaps, each with its reason, in seq order, on both routes', async () => {
  const user = 'mixed';
  const post = async (ttl?: number): Promise<void> => {
    const answer = await api.post('/v1/messages', { to: user, type: 't', data: 1, ...(ttl === undefined ? {} : { ttl }) });
    assert.equal(answer.status, 201, answer.text);
  };
  await post();
  await post();
  await post();
  await post(1);
  await post(1);
  await post();
  assert.equal(await raw.xdel(`px:{${user}}:inbox`, '2-0', '3-0'), 2);
  const gapsOf = async (client: PixiuClient, path: string): Promise<{ seqs: number[]; gaps: unknown[] }> => {
    const answer = await client.get(path);
    assert.equal(answer.status, 200, answer.text);
    const body = answer.body as Page;
    return { seqs: body.messages.map((m) => m.seq), gaps: body.gaps };
  };
  await waitUntil('seqs 4 and 5 expire', async () => (await gapsOf(api, `/v1/users/${user}/messages`)).seqs.length === 2, 10_000, 100);
  const expected = { seqs: [1, 6], gaps: [{ from: 2, to: 3, reason: 'trimmed' }, { from: 4, to: 5, reason: 'expired' }] };
  assert.deepEqual(await gapsOf(api, `/v1/users/${user}/messages`), expected);
  const mine = new PixiuClient(server.service.url, await testToken({ kind: 'secret', secret: JWT_SECRET }, user));
  assert.deepEqual(await gapsOf(mine, '/v1/me/messages'), expected);
});

test('a page cut by its data right after a gap answers for the gap: next_after_seq is past it, and the next page does not report it again', async () => {
  // Seq 2 deleted by hand between two messages that do not fit one page together: the
  // page holds seq 1 and the gap 2, and ends before seq 3.
  const user = 'cut-after-gap';
  const big = (c: string): string => c.repeat(600_000);
  await postData(user, [big('a'), big('b'), big('c')]);
  assert.equal(await raw.xdel(`px:{${user}}:inbox`, '2-0'), 1);
  const page = async (after: number): Promise<{ seqs: number[]; gaps: unknown[]; next: number }> => {
    const answer = await api.get(`/v1/users/${user}/messages?after_seq=${after}`);
    assert.equal(answer.status, 200, answer.text.slice(0, 300));
    const body = answer.body as Page;
    return { seqs: body.messages.map((m) => m.seq), gaps: body.gaps, next: body.next_after_seq };
  };
  assert.deepEqual(await page(0), { seqs: [1], gaps: [{ from: 2, to: 2, reason: 'trimmed' }], next: 2 });
  assert.deepEqual(await page(2), { seqs: [3], gaps: [], next: 3 });
});

test('after_seq above latest_seq is no error: no messages, and next_after_seq is after_seq (docs/api.md)', async () => {
  const user = 'ahead';
  assert.equal((await api.post('/v1/messages', { to: user, type: 't', data: 1 })).status, 201);
  for (const after of [1, 7, 1000]) {
    const answer = await api.get(`/v1/users/${user}/messages?after_seq=${after}`);
    assert.equal(answer.status, 200, answer.text);
    const body = answer.body as Page;
    assert.deepEqual([body.messages, body.gaps, body.latest_seq, body.next_after_seq], [[], [], 1, after], `after_seq=${after}`);
  }
});

test('limit counts the inbox entries a page reads: expired messages come as gaps, so a page may be empty with more after it (docs/api.md)', async () => {
  const user = 'expiring';
  for (let i = 1; i <= 3; i++) assert.equal((await api.post('/v1/messages', { to: user, type: 't', data: i, ttl: 1 })).status, 201);
  assert.equal((await api.post('/v1/messages', { to: user, type: 't', data: 4 })).status, 201);
  const page = async (after: number, limit: number): Promise<{ seqs: number[]; gaps: unknown[]; next: number; latest: number }> => {
    const answer = await api.get(`/v1/users/${user}/messages?after_seq=${after}&limit=${limit}`);
    assert.equal(answer.status, 200, answer.text);
    const body = answer.body as Page;
    return { seqs: body.messages.map((m) => m.seq), gaps: body.gaps, next: body.next_after_seq, latest: body.latest_seq };
  };
  await waitUntil('the first three messages expire', async () => (await page(0, 100)).seqs.length === 1, 10_000, 100);
  assert.deepEqual(await page(0, 100), { seqs: [4], gaps: [{ from: 1, to: 3, reason: 'expired' }], next: 4, latest: 4 });
  // Two entries read, both expired: an empty page that is not the end.
  assert.deepEqual(await page(0, 2), { seqs: [], gaps: [{ from: 1, to: 2, reason: 'expired' }], next: 2, latest: 4 });
  assert.deepEqual(await page(2, 2), { seqs: [4], gaps: [{ from: 3, to: 3, reason: 'expired' }], next: 4, latest: 4 });
});
