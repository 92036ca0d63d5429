/**
 * A client that half-closes its connection after its requests (its end() after the last
 * write: `printf … | nc -N`, scripted clients) gets their answers, then the node's close
 * (src/api/app.ts, `httpAllowHalfOpen`; RFC 9112 §9.6). Node's default ended the
 * connection at the client's FIN and dropped every answer not yet written: a POST was
 * stored and its 201 never sent (a black-box tester's note, pipeline2), `/readyz`
 * (which asks Redis) got no answer at all. Raw sockets against the real service.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { within } from '../harness/checks.js';
import { cleanupList, startInProcessAlone, type InProcessServer } from '../harness/pixiu-server.js';

const files = cleanupList();
let server: InProcessServer;

before(async () => {
  ({ server } = await startInProcessAlone(files, { partitions: '1', storeDurability: 'relaxed' }));
});

after(() => files.run());

/** Sends `requests` on a new connection, half-closes it, and returns all the node sent before it closed. */
async function sendAndHalfClose(requests: string): Promise<string> {
  const { hostname, port } = new URL(server.service.url);
  const socket = net.connect(Number(port), hostname);
  let text = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => { text += chunk; });
  await once(socket, 'connect');
  socket.end(requests);
  await within(10_000, 'the node closes the connection', once(socket, 'close'));
  return text;
}

/** The status lines in `text`. */
const statusLines = (text: string): string[] => text.match(/HTTP\/1\.1 \d{3} [^\r]*/g) ?? [];

test('a POST sent with the connection then half-closed is answered 201 (and stored), then the node closes the connection', async () => {
  const body = JSON.stringify({ to: 'half-closer', type: 't', data: { n: 1 } });
  const text = await sendAndHalfClose(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  assert.deepEqual(statusLines(text), ['HTTP/1.1 201 Created']);
  const id = (JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { id: string }).id;
  const inbox = await server.client.get('/v1/users/half-closer/messages');
  assert.deepEqual((inbox.body as { messages: Array<{ id: string }> }).messages.map((m) => m.id), [id]);
});

test('pipelined requests then a half-close: every one is answered, in order, then the close', async () => {
  const text = await sendAndHalfClose(['/readyz', '/healthz', '/readyz', '/v1/nosuch'].map((p) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''));
  assert.deepEqual(statusLines(text), ['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK', 'HTTP/1.1 200 OK', 'HTTP/1.1 404 Not Found'], text);
});

test('a half-close in the middle of a request\'s body is no request: the connection closes without acting on it', async () => {
  const body = JSON.stringify({ to: 'cut-short', type: 't', data: {} });
  const text = await sendAndHalfClose(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body) + 10}\r\n\r\n${body}`);
  assert.equal(statusLines(text).some((l) => l.includes('201')), false, text);
  const inbox = await server.client.get('/v1/users/cut-short/messages');
  assert.deepEqual((inbox.body as { messages: unknown[] }).messages, []);
});
