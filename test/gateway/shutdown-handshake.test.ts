/**
 * A handshake caught by shutdown (DESIGN.md §6: "On SIGTERM: stop accepting, close
 * every socket with 1001"): one that passed the first "accepting" check before shutdown
 * began, and finishes after the gateway closed its connections, is refused 503
 * (docs/protocol.md: the node is shutting down — retry), never welcomed and left open
 * until the process ends. The handshake is held in its token check by a JWKS server that
 * answers only when the test says so.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import WebSocket from 'ws';
import { JWKS_COOLDOWN_MS } from '../../src/auth/jwt.js';
import { waitUntil, waitUntilNotAccepting } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

let redis: RedisServer;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
});

after(() => cleanup.run());

test('a handshake in its token check when shutdown begins is refused 503 once it goes on, not welcomed', { timeout: 30_000 }, async () => {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => { release = resolve; });
  let asked: () => void = () => undefined;
  const keysAsked = new Promise<void>((resolve) => { asked = resolve; });
  let fetches = 0;
  const jwks = http.createServer((_req, res) => {
    fetches += 1;
    // The start's fetch gets a set without the token's kid, so that the token makes the
    // node ask again, and that request is held: the handshake is in its token check.
    if (fetches === 1) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [{ ...jwk, kid: 'k0' }] }));
      return;
    }
    asked();
    void released.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  });
  jwks.listen(0, '127.0.0.1');
  await once(jwks, 'listening');
  cleanup.after(() => {
    jwks.closeAllConnections();
    jwks.close();
  });
  const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;

  const { logger, lines } = capturingLogger();
  const server = await startInProcess(cleanup, { redisUrl: redis.url, redisPrefix: 'shs:', storeDurability: 'relaxed', jwksUrl }, logger);
  // A kid the set lacks is looked for again only once jose's cooldown since the last
  // fetch is over, and that runs from when jose read the start's fetch (the node then
  // logs `JWKS fetched`), not from when the JWKS server above answered it: on a loaded
  // machine the two were more than 100 ms apart, the token was refused 401 without the
  // keys being asked again, and the test waited for that ask until its timeout.
  await waitUntil('the start\'s JWKS fetch read', async () => lines.some((l) => l.msg === 'JWKS fetched'));
  await delay(JWKS_COOLDOWN_MS + 100);
  const token = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setSubject('late')
    .setIssuedAt().setExpirationTime(Math.floor(Date.now() / 1000) + 3600).sign(privateKey);

  const ws = new WebSocket(`${server.service.url.replace(/^http/, 'ws')}/v1/connect?device=d`, { headers: { authorization: `Bearer ${token}` } });
  const frames: string[] = [];
  ws.on('message', (data) => frames.push(String(data)));
  ws.on('error', () => undefined);
  const refused = new Promise<{ status: number; body: string }>((resolve) => {
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => { body += chunk; }).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
  });
  const opened = new Promise<string>((resolve) => ws.on('open', () => resolve('opened')));

  // Past the first "accepting" check, waiting for the keys; a refusal before that ends
  // the test at once, with its answer.
  await Promise.race([keysAsked, refused.then((r) => assert.fail(`refused before the keys were asked for: ${r.status} ${r.body}`))]);
  const closing = server.service.close(); // SIGTERM
  // The gateway has closed its connections, and HTTP takes no new ones.
  await waitUntilNotAccepting(server.service.url);
  release();
  const outcome = await Promise.race([refused, opened]);
  assert.notEqual(outcome, 'opened', `the handshake opened; frames ${JSON.stringify(frames)}`);
  const { status, body } = outcome as { status: number; body: string };
  assert.equal(status, 503, body);
  assert.equal((JSON.parse(body) as { error: { code: string } }).error.code, 'UNAVAILABLE');
  await closing;
});
