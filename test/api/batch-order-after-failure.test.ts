/**
 * A batch's messages to one user land in batch order (docs/api.md), also when part of
 * the batch failed for want of Redis or the store and the producer retries it with the
 * same `client_msg_id`s (DESIGN.md §7: a retry completes the message): after an item's
 * retryable failure (503), no later item of its batch may reach its users first, or the
 * retry would append the earlier item after it.
 *
 * - Redis: the node's command connection is dropped mid-batch (`CLIENT KILL`); the
 *   appends sent while it was down failed, and those sent once it was back went on.
 * - The store: one partition's folder is a small tmpfs, filled (root with the right to
 *   mount one; skipped without it).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { partitionOfClientMsgId } from '../../src/store/route.js';
import { waitUntil } from '../harness/checks.js';
import { cleanupList, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { fill } from '../harness/small-disk.js';

interface Item { status: number; id?: string }

const cleanup = cleanupList();
let redis: RedisServer;
let raw: Redis;

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  raw = new Redis(redis.url);
  cleanup.after(() => raw.disconnect());
});
after(() => cleanup.run());

/** Posts `body` until every item is 2xx (at most 50 tries, 200 ms apart); answers the items. */
async function retryUntilDone(server: InProcessServer, body: unknown): Promise<Item[]> {
  let results: Item[] = [];
  for (let tries = 0; tries < 50; tries++) {
    results = ((await server.client.post('/v1/messages/batch', body)).body as { results: Item[] }).results;
    if (results.every((r) => r.status < 300)) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.ok(results.every((r) => r.status < 300), `the retries complete the batch: ${JSON.stringify(results.map((r) => r.status))}`);
  return results;
}

/** The MsgIDs in `user`'s inbox, in seq order. */
async function inboxIds(server: InProcessServer, user: string): Promise<string[]> {
  const page = await server.client.get(`/v1/users/${user}/messages?limit=1000`);
  return (page.body as { messages: { id: string }[] }).messages.map((m) => m.id);
}

test('a batch retried after the node\'s Redis connection dropped mid-batch leaves every user\'s messages in batch order', { timeout: 120_000 }, async (t) => {
  const server = await startInProcess(t, { redisUrl: redis.url });
  const users = Array.from({ length: 1000 }, (_, i) => `u${i}`);
  const body = { messages: Array.from({ length: 100 }, (_, i) => ({ to: users, type: 't', data: i, client_msg_id: `blip-${i}` })) };
  const answer = server.client.post('/v1/messages/batch', body);
  // Once the batch is under way, the node's command connection drops (a network blip).
  await waitUntil('the batch is under way', async () => (await raw.xlen('px:{u999}:inbox')) >= 10, 30_000, 5);
  const clients = await raw.client('LIST') as string;
  for (const line of clients.split('\n')) {
    const id = / name=pixiu /.test(line) ? /id=(\d+)/.exec(line)?.[1] : undefined;
    if (id !== undefined) await raw.client('KILL', 'ID', id);
  }
  await answer;
  const order = (await retryUntilDone(server, body)).map((r) => r.id);
  let wrong = 0;
  for (const user of users) if (JSON.stringify(await inboxIds(server, user)) !== JSON.stringify(order)) wrong += 1;
  assert.equal(wrong, 0, `${wrong} of ${users.length} users got the batch's messages out of batch order`);
});

test('a batch item refused by its full store partition lets no later item to the same user go first; retried, both land in batch order', { timeout: 60_000 }, async (t) => {
  // Undone last first: the server, the mount, the folder.
  const undo = cleanupList();
  t.after(() => undo.run());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-batch-order-'));
  undo.after(() => rm(dataDir, { recursive: true, force: true }));
  // Item 0's partition is full; item 1 is stored in another, with room.
  const full = partitionOfClientMsgId('order-0', 8);
  let other = 1;
  while (partitionOfClientMsgId(`order-${other}`, 8) === full) other += 1;
  const disk = path.join(dataDir, 'xiu', String(full));
  await mkdir(disk, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', disk], { stdio: 'ignore' });
  } catch {
    t.skip('no right to mount a tmpfs');
    return;
  }
  undo.after(() => execFileSync('umount', ['-l', disk]));
  const server = await startInProcess(undo, { redisUrl: redis.url, redisPrefix: 'order:', dataDir, partitions: '8' });
  const data = 'x'.repeat(20_000);
  const body = { messages: [
    { to: 'alice', type: 't', data: { n: 0, data }, client_msg_id: 'order-0' },
    { to: 'alice', type: 't', data: { n: 1, data }, client_msg_id: `order-${other}` },
  ] };
  const filler = await fill(disk);
  const first = await server.client.post('/v1/messages/batch', body);
  assert.deepEqual((first.body as { results: Item[] }).results.map((r) => r.status), [503, 503], first.text);
  // Room again: the producer retries the batch until every item is done.
  await unlink(filler);
  const results = await retryUntilDone(server, body);
  assert.deepEqual(await inboxIds(server, 'alice'), results.map((r) => r.id), 'alice holds the batch\'s messages in batch order');
});
