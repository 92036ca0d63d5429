/**
 * SIGTERM with many clients connected (DESIGN.md §6: stop accepting, close every socket
 * with 1001, flush ack cursors, exit 0), proving the flush is the shutdown's own: the
 * node's regular rounds of ack writes (DESIGN.md §5, `PIXIU_ACK_FLUSH_INTERVAL`, 100 ms
 * by default) are set far longer than the test, the acks are shown not to be in Redis
 * a whole heartbeat period (several default rounds) after the server has them, and so
 * only the shutdown can have written them.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { openInbox } from '../harness/checks.js';
import { PixiuClient, spawnServe, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET, expectPong } from './gateway-fixture.js';

const PREFIX = 'shut:';
const API_TOKEN = 'shutdown-acks-test-api-token';
/** Connected clients, one user each. */
const CLIENTS = 100;
/** Messages posted to every user before they connect. */
const MESSAGES = 3;
/** Handshakes in flight at once. */
const CONNECT_CONCURRENCY = 20;
/**
 * The server's ping interval: the test's clock. Two pings after the acks mean a whole
 * period has passed on the server, five default ack rounds (100 ms).
 */
const HEARTBEAT_MS = 500;

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/** The seq user `i`'s client acks up to: 1, 2 or 3, so a wrong user's cursor shows. */
function lastAck(i: number): number {
  return (i % MESSAGES) + 1;
}

/** Every device cursor of each of `users`, read straight from `px:{uid}:acks`. */
async function ackHashes(raw: Redis, keys: Keys, users: readonly string[]): Promise<Record<string, string>[]> {
  return Promise.all(users.map((u) => raw.hgetall(keys.acks(u))));
}

test(`SIGTERM with ${CLIENTS} clients: each is closed 1001 and its last ack is in px:{uid}:acks, written by the shutdown, not by a round`, { timeout: 120_000 }, async (t) => {
  const proc = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: PREFIX, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info', PIXIU_STORE_DURABILITY: 'relaxed',
    PIXIU_HEARTBEAT: `${HEARTBEAT_MS}ms`,
    // No round of ack writes comes within the test: only the shutdown can write them.
    PIXIU_ACK_FLUSH_INTERVAL: '1h',
  }, t);
  const api = new PixiuClient(proc.url, API_TOKEN);
  const users = Array.from({ length: CLIENTS }, (_, i) => `sd-${i}`);
  for (let m = 0; m < MESSAGES; m++) {
    const answer = await api.post('/v1/messages', { to: users, type: 'note', data: { m } });
    assert.equal(answer.status, 201, answer.text);
  }

  const clients: TestClient[] = new Array<TestClient>(CLIENTS);
  let next = 0;
  await Promise.all(Array.from({ length: CONNECT_CONCURRENCY }, async () => {
    while (next < CLIENTS) {
      const i = next++;
      const client = await TestClient.connect(proc.url, { token: await testToken(JWT_KEY, users[i] as string), params: { device: 'phone' } });
      t.after(() => client.close());
      clients[i] = client;
    }
  }));

  // Each client acks every message up to its own last one, one ack per message; the
  // pong after them means the server has handled them all. Then two server pings: a
  // whole heartbeat period has passed since, in which default rounds would have
  // written the cursors.
  await Promise.all(clients.map(async (client, i) => {
    const msgs = await client.msgs(MESSAGES);
    assert.deepEqual(msgs.map((f) => f.seq), [1, 2, 3], users[i]);
    for (let seq = 1; seq <= lastAck(i); seq++) client.ack(seq);
    await expectPong(client);
    for (let ping = 0; ping < 2; ping++) await once(client.ws, 'ping', { signal: AbortSignal.timeout(10 * HEARTBEAT_MS) });
  }));

  const { redis: raw } = await openInbox(t, redis.url, PREFIX);
  const keys = new Keys(PREFIX);
  assert.deepEqual(await ackHashes(raw, keys, users), users.map(() => ({})), 'no ack cursor written before the shutdown');

  const exit = await proc.term();
  assert.deepEqual(exit, { code: 0, signal: null }, proc.stderr());
  const closes = await Promise.all(clients.map((c) => c.waitClose()));
  assert.deepEqual(closes.map((c) => c.code), users.map(() => 1001));
  assert.deepEqual(await ackHashes(raw, keys, users), users.map((_, i) => ({ phone: String(lastAck(i)) })));
  // Every cursor was written: the log says nothing was lost (the line of a shutdown
  // whose Redis did not answer, test/service/shutdown.test.ts).
  assert.match(proc.stdout(), /"msg":"pixiu stopped"/, 'the log of the whole shutdown is here');
  assert.deepEqual(proc.stdout().split('\n').filter((line) => line.includes('ack cursors could not be written')), [], 'no cursor is reported lost');
});
