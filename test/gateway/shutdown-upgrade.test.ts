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
import { waitUntil } from '../harness/checks.js';
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

test('a handshake waiting on its presence entry when shutdown begins is closed 1001 as its WebSocket opens, never welcomed', { timeout: 30_000 }, async () => {
  const server = await startInProcess(cleanup, { redisUrl: redis.url, redisPrefix: 'shu:', storeDurability: 'relaxed', jwtSecret: JWT_SECRET });
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
    // Its checks take no I/O up to the presence write, which waits on the frozen Redis.
    await delay(300);
    const closing = server.service.close(); // SIGTERM
    await waitUntil('the node takes no new connections', async () => {
      try {
        await fetch(`${server.service.url}/healthz`);
        return false;
      } catch {
        return true;
      }
    });
    redis.resume();
    resumed = true;
    const { refused, closed } = await outcome;
    assert.deepEqual(frames.filter((f) => f.includes('"welcome"')), [], 'never welcomed');
    // Had shutdown come before its last check, the refusal is 503 (as shutdown-handshake.test.ts).
    if (refused !== undefined) assert.equal(refused, 503);
    else assert.equal(closed, 1001);
    await closing;
  } finally {
    if (!resumed) redis.resume();
  }
});
