/**
 * A request with more than one `Authorization` field line is refused 400
 * INVALID_REQUEST, "more than one Authorization header", on every route that reads a
 * token — producer routes, `/v1/me/*` and the WebSocket handshake `/v1/connect` — in
 * either order of a good and a bad token, and nothing is done. Before, Node's parser
 * kept the first and dropped the second, so a proxy or rate limiter reading the last
 * one took the request for another caller's (a black-box security tester's finding,
 * walk22 F1). `Authorization` is no list (RFC 9110 §11.6.2), as `Host` is none (its
 * second line was already refused: docs/api.md, "Errors").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { expectError } from '../harness/checks.js';
import { cleanupList, startInProcessAlone, type HttpAnswer } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET } from '../gateway/gateway-fixture.js';

const TWICE = /^more than one Authorization header/;

/**
 * Sends one request whose raw headers are `headers` (name, value, name, value, …: a
 * name may repeat, which fetch and a headers object cannot do), with `body` as JSON
 * when given, and reads its answer. An upgrade request refused is answered as any.
 */
function requestWithHeaders(url: string, method: string, path: string, headers: readonly string[], body?: unknown): Promise<HttpAnswer> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  // Node sends no Host of its own beside raw headers.
  const host = ['Host', new URL(url).host];
  const all = text === undefined ? [...host, ...headers] : [...host, ...headers, 'Content-Type', 'application/json', 'Content-Length', String(Buffer.byteLength(text))];
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request(url + path, { method, headers: all, agent: false });
    req.on('error', reject);
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error('upgraded; expected a refusal'));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const answerText = Buffer.concat(chunks).toString();
        const answerHeaders = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') answerHeaders.set(k, v);
        let parsed: unknown;
        try {
          parsed = JSON.parse(answerText);
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: answerHeaders, text: answerText, body: parsed, elapsedMs: Date.now() - started });
      });
    });
    req.end(text);
  });
}

test('two Authorization headers are refused 400 on producer routes, /v1/me and the WebSocket handshake, whichever comes first; one is served', async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const { server } = await startInProcessAlone(files, { jwtSecret: JWT_SECRET });
  const url = server.service.url;
  const api = `Bearer ${server.service.secrets.apiToken}`;
  const wrong = 'Bearer wrongwrongwrongwrongwrong';
  const alice = `Bearer ${await testToken(JWT_KEY, 'alice')}`;
  const message = { to: 'alice', type: 't', data: 1 };

  // Producer route, in both orders, and the same token twice: nothing stored.
  for (const [first, second] of [[api, wrong], [wrong, api], [api, api]] as const) {
    const answer = await requestWithHeaders(url, 'POST', '/v1/messages', ['Authorization', first, 'authorization', second], message);
    expectError(answer, 400, 'INVALID_REQUEST', TWICE);
  }
  const inbox = await server.client.get('/v1/users/alice/messages');
  assert.equal(inbox.status, 200, inbox.text);
  assert.deepEqual((inbox.body as { messages: unknown[] }).messages, [], 'nothing was stored');

  // With one, the same request is served (the check counts lines, not tokens).
  const one = await requestWithHeaders(url, 'POST', '/v1/messages', ['Authorization', api], message);
  assert.equal(one.status, 201, one.text);

  // Client routes: a user's JWT beside the API token, either order.
  for (const [first, second] of [[alice, api], [api, alice]] as const) {
    const page = await requestWithHeaders(url, 'GET', '/v1/me/messages', ['Authorization', first, 'Authorization', second]);
    expectError(page, 400, 'INVALID_REQUEST', TWICE);
    const ack = await requestWithHeaders(url, 'POST', '/v1/me/ack', ['Authorization', first, 'Authorization', second], { device: 'd', seq: 1 });
    expectError(ack, 400, 'INVALID_REQUEST', TWICE);
  }
  const mine = await requestWithHeaders(url, 'GET', '/v1/me/messages', ['Authorization', alice]);
  assert.equal(mine.status, 200, mine.text);

  // The WebSocket handshake: refused before the upgrade, its connection closed after.
  const upgrade = ['Connection', 'Upgrade', 'Upgrade', 'websocket', 'Sec-WebSocket-Version', '13', 'Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='];
  for (const [first, second] of [[alice, wrong], [wrong, alice]] as const) {
    const answer = await requestWithHeaders(url, 'GET', '/v1/connect?device=d', [...upgrade, 'Authorization', first, 'Authorization', second]);
    expectError(answer, 400, 'INVALID_REQUEST', TWICE);
    assert.equal(answer.headers.get('connection'), 'close');
  }
});
