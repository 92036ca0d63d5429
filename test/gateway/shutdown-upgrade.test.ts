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
import WebSocket from 'ws';
import { Presence } from '../../src/cluster/presence.js';
import { waitUntilNotAccepting, within } from '../harness/checks.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from './gateway-fixture.js';

let redis: RedisServer;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
});

after(() => cleanup.run());

/**
 * The case on a fresh node: the handshake's upgrade request reaches the node with Redis
 * frozen; once it has passed its last "accepting" check and asks for its presence entry
 * (Presence.add called: its write waits on the frozen Redis) shutdown begins, then Redis
 * resumes. Answers how the client was turned away and the frames it got.
 */
async function shutdownMidHandshake(): Promise<{ refused?: number; closed?: number; frames: string[] }> {
  const server = await startInProcess(cleanup, { redisUrl: redis.url, redisPrefix: 'shu:', storeDurability: 'relaxed', jwtSecret: JWT_SECRET });
  const token = await testToken(JWT_KEY, 'midway');
  // Watched, not changed: the add the handshake makes right after its last check.
  const add = Presence.prototype.add;
  let asked: () => void = () => undefined;
  const adding = new Promise<void>((resolve) => { asked = resolve; });
  Presence.prototype.add = function (this: Presence, ...args: Parameters<Presence['add']>) {
    if (args[0] === 'midway') asked();
    return add.apply(this, args);
  };
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
    await within(10_000, 'the handshake\'s presence add', adding);
    const closing = server.service.close(); // SIGTERM
    await waitUntilNotAccepting(server.service.url);
    redis.resume();
    resumed = true;
    const answer = await outcome;
    await closing;
    return { ...answer, frames };
  } finally {
    Presence.prototype.add = add;
    if (!resumed) redis.resume();
  }
}

test('a handshake waiting on its presence entry when shutdown begins is closed 1001 as its WebSocket opens, never welcomed', { timeout: 60_000 }, async () => {
  const { refused, closed, frames } = await shutdownMidHandshake();
  assert.deepEqual(frames.filter((f) => f.includes('"welcome"')), [], 'never welcomed');
  assert.deepEqual({ refused, closed }, { refused: undefined, closed: 1001 }, 'closed 1001 as it opens, not refused: it was past its last check');
});
