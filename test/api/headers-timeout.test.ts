/**
 * `PIXIU_HEADERS_TIMEOUT` (src/api/app.ts: Node's `headersTimeout`, checked every quarter
 * of it): a new connection's first request must have its line and headers in within it,
 * counted from the connection's opening, so a connection that sends nothing is answered
 * 408 and closed after it (10 s by default), not held for the request timeout and a
 * quarter of it more (73 s before: secaudit F1, each such socket a file descriptor).
 * A keep-alive connection idle between requests is kept as before (72 s), and a body
 * slower than the headers timeout is still taken: only the head is held to it. Over raw
 * sockets against the real service on a real port, real Redis.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { within } from '../harness/checks.js';
import { cleanupList, type InProcessServer } from '../harness/pixiu-server.js';
import { startWithOwnRedis } from './api-fixture.js';

/** The headers timeout of the node under test, ms; its request timeout stays the default 60 s. */
const HEADERS_MS = 600;
/** Node checks every quarter of it; slack past that for a loaded machine, ms. */
const BOUND_MS = HEADERS_MS + HEADERS_MS / 4 + 2000;

const files = cleanupList();
let server: InProcessServer;

before(async () => {
  server = await startWithOwnRedis(files, { partitions: '1', storeDurability: 'relaxed', headersTimeoutMs: `${HEADERS_MS}ms` });
});

after(() => files.run());

/** A client's connection: what it heard, and when the server ended it (ms, `performance.now()`). */
interface Client {
  readonly socket: net.Socket;
  readonly openedAt: number;
  heard: string;
  /** Resolves, with `performance.now()`, at the server's FIN. */
  readonly ended: Promise<number>;
}

/** Connects (the client's side kept open whatever the server does) and writes `bytes`, if any. */
async function open(bytes = ''): Promise<Client> {
  const { hostname, port } = new URL(server.service.url);
  const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
  socket.on('error', () => {});
  const ended = new Promise<number>((resolve) => socket.once('end', () => resolve(performance.now())));
  await once(socket, 'connect');
  const client: Client = { socket, openedAt: performance.now(), heard: '', ended };
  socket.on('data', (chunk: Buffer) => { client.heard += chunk.toString('latin1'); });
  if (bytes !== '') socket.write(bytes);
  return client;
}

/** Resolves once `client` has heard `count` answers in all (their status lines). */
async function answers(client: Client, count: number): Promise<void> {
  while ((client.heard.match(/HTTP\/1\.1 \d{3} /g)?.length ?? 0) < count) await once(client.socket, 'data');
}

test('a connection that sends nothing is answered 408 and closed after the headers timeout, not the request timeout', { timeout: 30_000 }, async () => {
  for (const [what, bytes] of [['nothing', ''], ['a request line cut short', 'GET /healthz HTTP/1.1\r\nHost: x\r\n']] as const) {
    const client = await open(bytes);
    const endedAt = await within(BOUND_MS, `${what}: the server's 408 and FIN`, client.ended);
    const after = endedAt - client.openedAt;
    assert.ok(after >= HEADERS_MS - 50, `${what}: closed ${Math.round(after)} ms after opening, before the headers timeout`);
    assert.match(client.heard, /^HTTP\/1\.1 408 /, what);
    assert.match(client.heard, /"code":"REQUEST_TIMEOUT"/, what);
    client.socket.destroy();
  }
});

test('a keep-alive connection idle between requests is kept past the headers timeout, and a later request\'s head is timed from its first byte', { timeout: 30_000 }, async () => {
  const client = await open('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await answers(client, 1);
  assert.match(client.heard, /^HTTP\/1\.1 200 /);
  // Three headers timeouts idle: still open (fastify's keepAliveTimeout, 72 s, holds it).
  await delay(3 * HEADERS_MS);
  assert.equal(client.socket.readableEnded, false, 'the idle keep-alive connection was closed');
  client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await answers(client, 2);
  // A third request whose head stops arriving: 408 once the timeout has passed from its first byte.
  const startedAt = performance.now();
  client.socket.write('GET /healthz HTTP/1.1\r\n');
  const endedAt = await within(BOUND_MS, 'the 408 of a head cut short', client.ended);
  assert.ok(endedAt - startedAt >= HEADERS_MS - 50, `closed ${Math.round(endedAt - startedAt)} ms after the third request began`);
  assert.match(client.heard, /HTTP\/1\.1 408 [^]*"code":"REQUEST_TIMEOUT"/);
  client.socket.destroy();
});

test('a body slower than the headers timeout is taken: only the head is held to it', { timeout: 30_000 }, async () => {
  const body = JSON.stringify({ to: 'slow-body', type: 'note', data: {} });
  const client = await open(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`);
  await delay(3 * HEADERS_MS);
  client.socket.write(body);
  await answers(client, 1);
  assert.match(client.heard, /^HTTP\/1\.1 201 /);
  client.socket.destroy();
});
