/**
 * The idle cut (DESIGN.md §6) is for a peer silent for the idle timeout: no pong and
 * no frame. A client that does not answer the server's pings but keeps sending frames
 * of its own — text frames, or WebSocket pings (RFC 6455 control frames) — is heard
 * from, and stays connected.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { within } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, startGateway, type GatewayFixture } from './gateway-fixture.js';

const HEARTBEAT_MS = 100;
const IDLE_MS = 400;

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, heartbeatMs: String(HEARTBEAT_MS), idleTimeoutMs: String(IDLE_MS) });
});

for (const { what, user, send } of [
  { what: 'text frames', user: 'chatty', send: (ws: WebSocket) => ws.send(JSON.stringify({ t: 'ping' })) },
  { what: 'WebSocket pings', user: 'pinger', send: (ws: WebSocket) => ws.ping() },
]) test(`a client that never answers pings but keeps sending ${what} is not cut as idle`, async () => {
  const ws = new WebSocket(new URL('/v1/connect', gw.url.replace(/^http/, 'ws')), {
    autoPong: false,
    headers: { authorization: `Bearer ${await testToken(JWT_KEY, user)}` },
  });
  ws.on('error', () => undefined);
  let closed: number | undefined;
  ws.on('close', (code) => { closed = code; });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('unexpected-response', () => reject(new Error('refused')));
  });
  let pongs = 0;
  ws.on('message', (data) => {
    if ((JSON.parse(data.toString()) as { t: string }).t === 'pong') pongs += 1;
  });
  ws.on('pong', () => {
    pongs += 1;
  });
  // A frame of its own every half heartbeat, never a pong.
  const sender = setInterval(() => send(ws), HEARTBEAT_MS / 2);
  try {
    // Until the server has sent enough unanswered pings to span the idle timeout three
    // times over, or has closed the connection.
    // Bounded: a node that stops pinging fails here, naming the wait, not at the file's timeout.
    let serverPings = 0;
    const wanted = (3 * IDLE_MS) / HEARTBEAT_MS;
    await within(10_000, `${wanted} pings from the server (or its close)`, new Promise<void>((resolve) => {
      ws.on('ping', () => {
        serverPings += 1;
        if (serverPings >= wanted) resolve();
      });
      ws.on('close', () => resolve());
    }));
    assert.equal(closed, undefined, `closed ${closed} after ${serverPings} unanswered pings, though it sent ${pongs} frames answered`);
    assert.equal(ws.readyState, WebSocket.OPEN);
  } finally {
    clearInterval(sender);
    ws.close();
  }
});
