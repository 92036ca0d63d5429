/**
 * A batch's messages to one user land in batch order also when Redis refuses some of
 * its appends with a state reply and runs the next ones (docs/api.md "Messages"; a
 * review's F2): another client's Lua script runs past `busy-reply-threshold`, so Redis
 * answers BUSY to the appends it reads meanwhile and runs those it reads once the script
 * is done — later appends of the same batch, to the same users, already sent. Before
 * append-9, an item answered 503 (BUSY) had a later item to the same user answered 201,
 * and the producer's retry of the earlier one landed after it. Now the later append is
 * refused too (append-13.lua step 2a, src/inbox/append-chain.ts), and the retry, in
 * batch order, appends both in order, each once.
 *
 * Real Redis (the harness's), a real server in process, over HTTP. Several rounds, each
 * on users of its own, until a round shows the refusal of an append whose earlier one was
 * refused (the scenario happened) or one ends with a user out of order (the test fails).
 *
 * And the precondition's edge: with an inbox cap of 1, other requests' appends to the
 * user trim a batch's append away before its next one, both in flight, is run; that one
 * is refused though the earlier landed (the append script cannot tell it from one never
 * appended). The producer's retry of the failed items appends at least the first of them
 * each time (it names no earlier append), so retrying completes the batch, in order.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { waitUntil } from '../harness/checks.js';
import { cleanupList, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

interface Item { status: number; id?: string; recipients?: { user: string; seq: number }[]; error?: { code: string; message: string } }
interface Message { to: string[]; type: string; data: unknown; client_msg_id: string }

/** Items per batch, recipients per item, users they are drawn from: ~150 messages per user. */
const ITEMS = 300;
const RECIPIENTS = 50;
const USERS = 100;
/** Most rounds before the test gives up on seeing the scenario. */
const ROUNDS = 6;
/** Redis answers BUSY once a script has run this long, ms (the default is 5 s). */
const BUSY_AFTER_MS = 50;
/** How long the other client's script runs, ms: BUSY answers for the last part of it. */
const SCRIPT_MS = 120;
/**
 * A script that runs for ARGV[1] ms of Redis's clock, calling nothing that writes: what
 * another application's long script is to Pixiu.
 */
const BUSY_LOOP = `local t = redis.call('TIME'); local start = t[1] * 1000 + math.floor(t[2] / 1000)
while true do
  local n = redis.call('TIME')
  if n[1] * 1000 + math.floor(n[2] / 1000) - start >= tonumber(ARGV[1]) then return 1 end
end`;

const cleanup = cleanupList();
let redis: RedisServer;
let raw: Redis;
let busy: Redis;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  raw = new Redis(redis.url);
  busy = new Redis(redis.url);
  cleanup.after(() => {
    raw.disconnect();
    busy.disconnect();
  });
  await raw.config('SET', 'busy-reply-threshold', String(BUSY_AFTER_MS));
});
after(() => cleanup.run());

/** A batch of {@link ITEMS} messages, each to {@link RECIPIENTS} of the round's users (a fixed draw). */
function batchOf(round: number): { messages: Message[]; users: string[] } {
  const users = Array.from({ length: USERS }, (_, i) => `r${round}-u${i}`);
  let seed = 7 + round;
  const draw = (): number => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed / 2_147_483_648;
  };
  const messages = Array.from({ length: ITEMS }, (_, i) => {
    const to = new Set<string>();
    while (to.size < RECIPIENTS) to.add(users[Math.floor(draw() * USERS)] as string);
    return { to: [...to], type: 't', data: { i }, client_msg_id: `r${round}-m${i}` };
  });
  return { messages, users };
}

/** Whether an item was refused for an earlier append of its batch to the same user. */
function refusedForAnEarlier(item: Item): boolean {
  return item.status === 503 && /earlier message of this batch/.test(item.error?.message ?? '');
}

/** Posts `messages` as one batch; answers its items. */
async function postBatch(server: InProcessServer, messages: readonly Message[]): Promise<Item[]> {
  const answer = await server.client.post('/v1/messages/batch', { messages });
  assert.equal(answer.status, 200, answer.text.slice(0, 300));
  return (answer.body as { results: Item[] }).results;
}

/** The MsgIDs in `user`'s inbox, in seq order. */
async function inboxIds(user: string): Promise<string[]> {
  const entries = await raw.xrange(`px:{${user}}:inbox`, '-', '+');
  return entries.map(([, fields]) => fields[fields.indexOf('id') + 1] as string);
}

/**
 * One round: the batch, with the other client's long script started once its appends are
 * under way; then the producer's retries of the items that failed, in batch order, until
 * every item is done. Answers how many items of the first answer were refused for an
 * earlier append of theirs, and the users whose inbox is not the batch's messages to
 * them, in batch order, each once.
 */
async function round(server: InProcessServer, n: number): Promise<{ refusedForEarlier: number; wrong: string[] }> {
  const { messages, users } = batchOf(n);
  const answer = postBatch(server, messages);
  // Under way: a user has a tenth of its messages.
  await waitUntil('the batch is under way', async () => (await raw.xlen(`px:{${users[0]}}:inbox`)) >= 15, 60_000, 2);
  const script = busy.eval(BUSY_LOOP, 0, String(SCRIPT_MS));
  const first = await answer;
  await script;
  const ids = first.map((r) => r.id);
  let pending = first.flatMap((r, i) => (r.status >= 300 ? [i] : []));
  for (let tries = 0; pending.length > 0 && tries < 20; tries++) {
    const results = await postBatch(server, pending.map((i) => messages[i] as Message));
    results.forEach((r, k) => {
      if (r.status < 300) ids[pending[k] as number] = r.id;
    });
    pending = pending.filter((_, k) => (results[k] as Item).status >= 300);
  }
  assert.deepEqual(pending, [], 'the retries complete the batch');
  const wrong: string[] = [];
  for (const user of users) {
    const expected = messages.flatMap((m, i) => (m.to.includes(user) ? [ids[i]] : []));
    if (JSON.stringify(await inboxIds(user)) !== JSON.stringify(expected)) wrong.push(user);
  }
  const refusedForEarlier = first.filter(refusedForAnEarlier).length;
  return { refusedForEarlier, wrong };
}

test('appends Redis refuses BUSY mid-batch while later ones to the same users run: after the retries every user holds the batch\'s messages in batch order, each once', { timeout: 300_000 }, async (t) => {
  const server = await startInProcess(t, { redisUrl: redis.url });
  const seen: string[] = [];
  for (let n = 0; n < ROUNDS; n++) {
    const { refusedForEarlier, wrong } = await round(server, n);
    seen.push(`round ${n}: ${refusedForEarlier} items refused for an earlier append, ${wrong.length} users out of order`);
    assert.deepEqual(wrong, [], `users whose inbox is not the batch's messages in batch order, each once (${seen.join('; ')})`);
    if (refusedForEarlier > 0) {
      t.diagnostic(seen.join('; '));
      return;
    }
  }
  assert.fail(`no round had an append refused for an earlier one: the scenario did not happen (${seen.join('; ')})`);
});

test('an inbox cap of 1 and other requests\' appends to the user trimming a batch\'s appends away: items refused for it complete on retry, in batch order', { timeout: 240_000 }, async (t) => {
  const server = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'cap1:', inboxCap: '1' });
  // The edge needs the flood's appends to land between two of the batch's: a loaded
  // machine may not interleave them in one round (a clean-clone CI run did not), so up
  // to three rounds, each a new batch, until one has an item refused for it.
  const seen: string[] = [];
  for (let n = 0; n < 3; n++) {
    const refused = await capRound(server, n);
    seen.push(`round ${n}: ${refused} items refused for an earlier append trimmed away`);
    if (refused > 0) {
      t.diagnostic(seen.join('; '));
      return;
    }
  }
  assert.fail(`no round had an item refused for an earlier append trimmed away: the edge did not happen (${seen.join('; ')})`);
});

/**
 * One round of the cap-1 test: a batch of 20 to alice, retried until done while single
 * messages to her flood in; asserts the batch completes in its order, each once.
 * @returns how many items were refused for an earlier append trimmed away
 */
async function capRound(server: InProcessServer, n: number): Promise<number> {
  const messages = Array.from({ length: 20 }, (_, i) => ({ to: ['alice'], type: 't', data: { i }, client_msg_id: `cap1-${n}-${i}` }));
  // Single messages to alice, 20 at a time, until the batch is done (their appends take
  // turns with the batch's: one between two of the batch's, enough to trim with a cap of 1).
  let done = false;
  const flood = Promise.all(Array.from({ length: 20 }, async () => {
    while (!done) assert.equal((await server.client.post('/v1/messages', { to: 'alice', type: 't', data: 'other' })).status, 201);
  }));
  const seqs: (number | undefined)[] = new Array<number | undefined>(messages.length);
  let refused = 0;
  let pending = messages.map((_, i) => i);
  try {
    const from = Number(await raw.hget('cap1:{alice}:meta', 'seq'));
    await waitUntil('the single messages are under way', async () => Number(await raw.hget('cap1:{alice}:meta', 'seq')) >= from + 100, 30_000, 5);
    for (let tries = 0; pending.length > 0 && tries < messages.length + 1; tries++) {
      const results = await postBatch(server, pending.map((i) => messages[i] as Message));
      refused += results.filter(refusedForAnEarlier).length;
      results.forEach((r, k) => {
        if (r.status < 300) seqs[pending[k] as number] = r.recipients?.[0]?.seq;
      });
      assert.ok(results.every((r) => r.status < 300 || refusedForAnEarlier(r)), JSON.stringify(results.find((r) => r.status >= 300)));
      // A batch's first item to alice names no earlier append: each retry appends at least it.
      assert.ok((results[0] as Item).status < 300, `the first item of try ${tries} is appended`);
      pending = pending.filter((_, k) => (results[k] as Item).status >= 300);
    }
  } finally {
    done = true;
    await flood;
  }
  assert.deepEqual(pending, [], 'the retries complete the batch');
  const order = seqs.map((seq) => seq ?? 0);
  assert.deepEqual(order, [...order].sort((a, b) => a - b), 'alice\'s seqs follow the batch\'s order');
  assert.equal(new Set(order).size, order.length);
  return refused;
}
