/**
 * A handshake caught by shutdown after its last "accepting" check (DESIGN.md §6: "On
 * SIGTERM: stop accepting, close every socket with 1001"): it is waiting on Redis for
 * its presence entry when shutdown begins and closes the connections there are, and its
 * WebSocket opens after that. It gets the same close, 1001, as it opens: never
 * `welcome`, never a connection left open until shutdown cuts it.
 * (shutdown-handshake.test.ts covers a handshake caught before that check: 503.)
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import WebSocket from 'ws';
import { waitUntil, waitUntilNotAccepting } from '../harness/checks.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET, serverSockets } from './gateway-fixture.js';

let redis: RedisServer;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
});

after(() => cleanup.run());

/**
 * One try of the case on a fresh node: the handshake's upgrade request reaches the node
 * with Redis frozen, `settleMs` later (time for its checks, which take no I/O up to the
 * presence write) shutdown begins, then Redis resumes. Answers how the client was
 * turned away and the frames it got.
 */
async function tryShutdownMidHandshake(settleMs: number): Promise<{ refused?: number; closed?: number; frames: string[] }> {
  const server = await startInProcess(cleanup, { redisUrl: redis.url, redisPrefix: `shu${settleMs}:`, storeDurability: 'relaxed', jwtSecret: JWT_SECRET });
  const sockets = serverSockets(server);
  const token = await testToken(JWT_KEY, 'midway');
  // With last_seq, the handshake reads no cursor: the first thing it waits on Redis for
  // is its presence entry, after its last "accepting" check.
  redis.pause();
  let resumed = false;
  try {
    const ws = new WebSocket(`${server.service.url.replace(/^http/, 'ws')}/v1/connect?device=mid&last_seq=0`, { headers: { authorization: `Bearer ${token}` } });
    const frames: string[] = [];
    ws.on('message', (data) => frames.push(String(data)));
    ws.on('error', () => undefined);
    const outcome = new Promise<{ refused?: number; closed?: number }>((resolve) => {
      ws.on('unexpected-response', (_req, res) => resolve({ refused: res.statusCode ?? 0 }));
      ws.on('close', (code) => resolve({ closed: code }));
    });
    await waitUntil('the server has the upgrade request', async () => sockets.has('mid'), 5000, 5);
    await delay(settleMs);
    const closing = server.service.close(); // SIGTERM
    await waitUntilNotAccepting(server.service.url);
    redis.resume();
    resumed = true;
    const answer = await outcome;
    await closing;
    return { ...answer, frames };
  } finally {
    if (!resumed) redis.resume();
  }
}

test('a handshake waiting on its presence entry when shutdown begins is closed 1001 as its WebSocket opens, never welcomed', { timeout: 60_000 }, async () => {
  // A loaded machine may not have run the handshake's checks by the time shutdown
  // begins: then it is refused 503 (shutdown-handshake.test.ts's case) and the case is
  // tried again with more time, so that this test cannot pass without reaching it.
  const outcomes: string[] = [];
  for (const settleMs of [300, 1000, 3000]) {
    const { refused, closed, frames } = await tryShutdownMidHandshake(settleMs);
    assert.deepEqual(frames.filter((f) => f.includes('"welcome"')), [], 'never welcomed');
    if (refused !== undefined) {
      assert.equal(refused, 503);
      outcomes.push(`${settleMs} ms: refused ${refused}`);
      continue;
    }
    assert.equal(closed, 1001);
    return;
  }
  assert.fail(`the handshake never got past its last check before shutdown (${outcomes.join('; ')})`);
});
