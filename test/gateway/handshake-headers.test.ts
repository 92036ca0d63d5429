/**
 * The WebSocket handshake headers the gateway checks itself, before its presence write
 * (src/gateway/connect-route.ts): protocol version 13 only — `ws` also takes 8, the
 * hybi-08 draft whose browsers sent Sec-WebSocket-Origin, which the Origin check does
 * not read — and what `ws` would refuse with its own text/html 400 is refused first
 * with the JSON error body like every other refusal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import WebSocket from 'ws';
import { fileRedis } from '../harness/file-redis.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, startGateway, type GatewayFixture } from './gateway-fixture.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url });
});

test('a client speaking WebSocket protocol version 8 (with Sec-WebSocket-Origin) is refused 400 before the upgrade, the answer naming version 13', async () => {
  // ws sends a version 8 client's origin as Sec-WebSocket-Origin, as hybi-08 browsers did.
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/v1/connect?device=v8`, {
    protocolVersion: 8,
    origin: 'https://evil.example',
    headers: { authorization: `Bearer ${await testToken(JWT_KEY, 'eight')}` },
  });
  ws.on('error', () => undefined);
  try {
    const refused = await new Promise<{ status: number; version: string | undefined; body: string }>((resolve, reject) => {
      ws.once('message', (data) => reject(new Error(`welcomed: ${String(data)}`)));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => { body += c; }).on('end', () => resolve({ status: res.statusCode ?? 0, version: res.headers['sec-websocket-version'] as string | undefined, body }));
      });
    });
    assert.equal(refused.status, 400, refused.body);
    assert.equal(refused.version, '13');
    assert.deepEqual(JSON.parse(refused.body), { error: { code: 'INVALID_REQUEST', message: 'missing or invalid Sec-WebSocket-Version header (only 13, RFC 6455)' } });
  } finally {
    ws.terminate();
  }
});

test('a Sec-WebSocket-Protocol naming one protocol twice is refused 400 with the JSON error body', async () => {
  const token = await testToken(JWT_KEY, 'twice');
  const answer = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
    const req = http.request(new URL('/v1/connect?device=dup', gw.url), {
      headers: {
        authorization: `Bearer ${token}`, connection: 'Upgrade', upgrade: 'websocket',
        'sec-websocket-key': randomBytes(16).toString('base64'), 'sec-websocket-version': '13',
        'sec-websocket-protocol': 'chat, chat',
      },
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error('upgraded'));
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => { body += c; }).on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
    });
    req.on('error', reject);
    req.end();
  });
  assert.equal(answer.status, 400, answer.body);
  assert.match(answer.type, /^application\/json/);
  const { error } = JSON.parse(answer.body) as { error: { code: string; message: string } };
  assert.equal(error.code, 'INVALID_REQUEST');
  assert.match(error.message, /Sec-WebSocket-Protocol/);
});
