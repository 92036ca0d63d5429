/**
 * A connection answered 408 REQUEST_TIMEOUT (or refused by the HTTP parser) is closed
 * within the lingering close's bound, {@link LINGER_MS} (docs/api.md "Errors"), whatever
 * the client does after the answer: silent with its side kept open, or trickling
 * bytes. Before, the server sent the answer and its FIN but kept the socket, reading,
 * for as long as the client kept the TCP connection (a security tester's finding:
 * 300 such connections held 300 fds for minutes, unauthenticated). Over raw sockets
 * against the real service on a real port, real Redis.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { LINGER_MS } from '../../src/api/lingering-close.js';
import { cleanupList, type InProcessServer } from '../harness/pixiu-server.js';
import { startWithOwnRedis } from './api-fixture.js';

const files = cleanupList();
let server: InProcessServer;

before(async () => {
  // Near the setting's minimum (100 ms): Node checks every quarter of it.
  server = await startWithOwnRedis(files, { partitions: '1', storeDurability: 'relaxed', requestTimeoutMs: '400ms' });
});

after(() => files.run());

/** Slack past the bound for a loaded machine, ms. */
const SLACK_MS = 1500;

/** A client's connection, kept open on its side whatever the server does. */
interface HeldClient {
  readonly socket: net.Socket;
  /** Resolves with what the client heard once the server's FIN arrived. */
  readonly ended: Promise<string>;
  /** Resolves when the client's socket is closed (a reset by the server's kernel). */
  readonly closed: Promise<void>;
  /** Resolves, with `performance.now()`, when the server's socket for it closes. */
  readonly serverClosed: Promise<number>;
}

/** Connects with `allowHalfOpen` (the server's FIN does not end the client's side) and writes `bytes`. */
async function holdOpen(bytes: string): Promise<HeldClient> {
  const serverClosed = new Promise<number>((resolve) => {
    server.service.app.server.once('connection', (s: net.Socket) => s.once('close', () => resolve(performance.now())));
  });
  const { hostname, port } = new URL(server.service.url);
  const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
  // A write after the server's close draws a reset: expected, and what `closed` sees.
  socket.on('error', () => {});
  let heard = '';
  socket.on('data', (chunk: Buffer) => { heard += chunk.toString('latin1'); });
  const ended = new Promise<string>((resolve) => socket.once('end', () => resolve(heard)));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(bytes);
  return { socket, ended, closed, serverClosed };
}

/** `promise`'s value, or `undefined` after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([promise, new Promise<undefined>((resolve) => setTimeout(resolve, ms, undefined).unref())]);
}

/** Asserts that `heard` is one 408 REQUEST_TIMEOUT with Connection: close. */
function assert408(heard: string, name: string): void {
  assert.match(heard, /^HTTP\/1\.1 408 /, name);
  assert.match(heard, /\r\nconnection: close\r\n/i, name);
  assert.match(heard, /"code":"REQUEST_TIMEOUT"/, name);
  assert.equal(heard.match(/HTTP\/1\.1 /g)?.length, 1, `${name}: one answer`);
}

/** Requests that stop arriving: in the request line, in the headers, in the body (with the API token, so the body is waited for). */
function stalled(): { 'request line': string; headers: string; body: string } {
  return {
    'request line': 'GET /healt',
    headers: 'GET /healthz HTTP/1.1\r\nHost: x\r\n',
    body: `POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n`
      + 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"to":',
  };
}

test('a client silent after the 408, its side kept open, has its connection closed by the server within the linger bound', { timeout: 30_000 }, async () => {
  for (const [part, bytes] of Object.entries(stalled())) {
    const client = await holdOpen(bytes);
    const heard = await within(client.ended, 5000);
    const answeredAt = performance.now();
    assert.ok(heard !== undefined, `${part}: no 408 and FIN in 5 s`);
    assert408(heard, part);
    const closedAt = await within(client.serverClosed, LINGER_MS + SLACK_MS);
    assert.ok(closedAt !== undefined, `${part}: the server still holds the socket ${LINGER_MS + SLACK_MS} ms after the 408`);
    assert.ok(closedAt - answeredAt < LINGER_MS + SLACK_MS, `${part}: closed ${Math.round(closedAt - answeredAt)} ms after the 408`);
    // What the client sees: nobody reads the connection any more, so a byte draws a
    // reset, and the next write fails (EPIPE) and closes the client's socket.
    const poke = setInterval(() => { if (client.socket.writable) client.socket.write('x'); }, 100);
    const refused = await within(client.closed.then(() => true), 3000);
    clearInterval(poke);
    client.socket.destroy();
    assert.equal(refused, true, `${part}: bytes sent after the close were not refused`);
  }
});

test('a client that trickles bytes after the 408 sees its connection closed within the linger bound', { timeout: 30_000 }, async () => {
  // A header line that never ends the head, then a byte every 100 ms.
  const client = await holdOpen(stalled().headers);
  const heard = await within(client.ended, 5000);
  const answeredAt = performance.now();
  assert.ok(heard !== undefined, 'no 408 and FIN in 5 s');
  assert408(heard, 'trickle');
  const trickle = setInterval(() => { if (client.socket.writable) client.socket.write('X-a: b\r\n'); }, 100);
  try {
    const closed = await within(client.closed.then(() => performance.now()), LINGER_MS + SLACK_MS);
    assert.ok(closed !== undefined, `the connection is still open ${LINGER_MS + SLACK_MS} ms after the 408`);
    assert.ok(closed - answeredAt < LINGER_MS + SLACK_MS, `closed ${Math.round(closed - answeredAt)} ms after the 408`);
  } finally {
    clearInterval(trickle);
    client.socket.destroy();
  }
});

test('a client silent after a 400 for bytes the HTTP parser refuses, its side kept open, has its connection closed within the linger bound', { timeout: 30_000 }, async () => {
  const client = await holdOpen('GARBAGE\r\n\r\n');
  const heard = await within(client.ended, 5000);
  const answeredAt = performance.now();
  assert.ok(heard !== undefined, 'no 400 and FIN in 5 s');
  assert.match(heard, /^HTTP\/1\.1 400 /);
  const closedAt = await within(client.serverClosed, LINGER_MS + SLACK_MS);
  assert.ok(closedAt !== undefined, `the server still holds the socket ${LINGER_MS + SLACK_MS} ms after the 400`);
  assert.ok(closedAt - answeredAt < LINGER_MS + SLACK_MS, `closed ${Math.round(closedAt - answeredAt)} ms after the 400`);
  client.socket.destroy();
});
