/**
 * The lines about a refused client token or WebSocket handshake, and the debug
 * `connection open`, carry the request's `reqId`, the id its answer says in
 * `X-Request-Id`, and an accepted handshake's 101 says it too: README "Addresses" tells
 * an operator to tie a node's line to the proxy's access line by that id, and these
 * lines carried only `ip` (walk36 F1), a 101 no id at all, so they could be matched to
 * the proxy's only by time and address.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import type { IncomingMessage } from 'node:http';
import type WsWebSocket from 'ws';
import { BAD_SIGNATURE_LOG } from '../../src/auth/jwt-refusals.js';
import { CONNECTION_LIMIT_LINE, NODE_FULL_LINE, ORIGIN_NOT_HOST } from '../../src/gateway/handshake-refusals.js';
import { capturingLogger, duplicateKeys, type LogLine } from '../harness/log-capture.js';
import { cleanupList, startInProcessAlone } from '../harness/pixiu-server.js';
import { Refused, TestClient, testToken } from '../harness/ws-client.js';

const WebSocket = createRequire(import.meta.url)('ws') as typeof WsWebSocket;

const FOREIGN_KEY = { kind: 'secret', secret: 'another-data-dirs-jwt-secret-of-32-chars' } as const;

/** A node on a private Redis with `overrides`, logging at debug into `lines`; the clock mocked for the thinned lines. */
async function node(t: TestContext, overrides: Record<string, string>) {
  const files = cleanupList();
  t.after(() => files.run());
  const { logger, lines, texts } = capturingLogger();
  const { server } = await startInProcessAlone(files, { logLevel: 'debug', ...overrides }, logger);
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  const token = await testToken(server.service.secrets.jwt, 'ann');
  /** The `reqId`s of the lines of `msg`. */
  const idsOf = (msg: string): unknown[] => lines.filter((l: LogLine) => l.msg === msg).map((l) => l.reqId);
  /** The X-Request-Id of a refused handshake's answer, the status checked. */
  const refusedId = async (attempt: Promise<TestClient>, status: number): Promise<string | null> => {
    const refusal = await attempt.then(() => assert.fail('connected'), (err: unknown) => err);
    assert.ok(refusal instanceof Refused, String(refusal));
    assert.equal(refusal.status, status, refusal.text);
    t.mock.timers.tick(10_000); // past the line's thinning
    return refusal.headers.get('x-request-id');
  };
  /** Opens a WebSocket as `user` with `headers`; resolves with it and its 101's headers, once open. */
  const upgrade = async (user: string, headers: Record<string, string> = {}) => {
    const url = new URL('/v1/connect?device=d', server.service.url.replace(/^http/, 'ws'));
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${await testToken(server.service.secrets.jwt, user)}`, ...headers } });
    t.after(() => ws.terminate());
    // `ws` emits `open` in the same tick as `upgrade`: both listened for at once.
    const [[res]] = await Promise.all([once(ws, 'upgrade') as Promise<[IncomingMessage]>, once(ws, 'open')]);
    return { ws, headers: res.headers };
  };
  return { server, lines, texts, token, idsOf, refusedId, upgrade };
}

test('a refused client token, on /v1/me and on a handshake, and a refused Origin are logged with the reqId their answer says in X-Request-Id', async (t) => {
  const { server, texts, idsOf, refusedId, token } = await node(t, {});
  const foreign = await testToken(FOREIGN_KEY, 'ann');
  const me = await server.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${foreign}`, 'x-request-id': 'trace-me-1' } });
  assert.equal(me.status, 401);
  assert.equal(me.headers.get('x-request-id'), 'trace-me-1');
  t.mock.timers.tick(10_000);
  // The node's own id when the client sends none.
  const made = await refusedId(TestClient.connect(server.service.url, { token: foreign, params: { device: 'd' } }), 401);
  assert.match(made ?? '', /^req-[0-9a-z]+$/);
  assert.deepEqual(idsOf(BAD_SIGNATURE_LOG), ['trace-me-1', made]);
  const origin = await refusedId(TestClient.connect(server.service.url, { token, params: { device: 'd' }, headers: { origin: 'https://elsewhere.example', 'x-request-id': 'trace-origin' } }), 403);
  assert.equal(origin, 'trace-origin');
  assert.deepEqual(idsOf(ORIGIN_NOT_HOST), ['trace-origin']);
  // Written with the node's logger, no request's child: one reqId, not two.
  assert.deepEqual(texts.flatMap(duplicateKeys), []);
});

test('an accepted handshake\'s 101 says X-Request-Id, the reqId of its debug connection open; the user\'s connection limit\'s 429 line carries its own', async (t) => {
  const { idsOf, refusedId, upgrade, server, token } = await node(t, { maxConnectionsPerUser: '1' });
  const opened = await upgrade('ann', { 'x-request-id': 'trace-open' });
  assert.equal(opened.headers['x-request-id'], 'trace-open');
  assert.deepEqual(idsOf('connection open'), ['trace-open']);
  const limited = await refusedId(TestClient.connect(server.service.url, { token, params: { device: 'tab2' } }), 429);
  assert.match(limited ?? '', /^req-[0-9a-z]+$/);
  assert.deepEqual(idsOf(CONNECTION_LIMIT_LINE), [limited]);
  // The node's own id, when the client sends none, in the 101 as in the line.
  const second = await upgrade('bob');
  assert.match(String(second.headers['x-request-id']), /^req-[0-9a-z]+$/);
  assert.deepEqual(idsOf('connection open'), ['trace-open', second.headers['x-request-id']]);
});

test('a handshake refused 503 by a full node is logged with the reqId its answer says', async (t) => {
  const { idsOf, refusedId, upgrade, server, token } = await node(t, { maxConnections: '1' });
  await upgrade('bob');
  const full = await refusedId(TestClient.connect(server.service.url, { token, params: { device: 'tab2' }, headers: { 'x-request-id': 'trace-full' } }), 503);
  assert.equal(full, 'trace-full');
  assert.deepEqual(idsOf(NODE_FULL_LINE), ['trace-full']);
});
