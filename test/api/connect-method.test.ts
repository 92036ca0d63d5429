/**
 * The CONNECT method (src/api/connect-method.ts): Pixiu is no proxy, and a CONNECT
 * request is answered as any method on an unknown route, 404 NOT_FOUND with the
 * catalogue's body, after the answers of the requests pipelined ahead of it, which
 * run and are answered. Node's default was to destroy the connection: no answer, and
 * the request ahead of it was cut off (a POST stored nothing). Over a raw socket
 * against the real service, real Redis.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { LINGER_MS } from '../../src/api/lingering-close.js';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';

const files = cleanupList();
let server: InProcessServer;

before(async () => {
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  server = await startInProcess(files, { redisUrl: redis.url, partitions: '1', storeDurability: 'relaxed' });
});

after(() => files.run());

/** Writes `bytes` on a new connection; resolves with all it heard once the server closed it. */
function exchange(bytes: string): Promise<string> {
  const { hostname, port } = new URL(server.service.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(bytes));
    let text = '';
    socket.on('data', (chunk: Buffer) => { text += chunk.toString('utf8'); });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

/** The statuses and JSON bodies of the answers in `text`, in order. */
function answers(text: string): { status: number; body: unknown }[] {
  return text.split(/(?=HTTP\/1\.1 \d{3} )/).filter(Boolean).map((one) => {
    const [head = '', body = ''] = one.split('\r\n\r\n');
    return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: JSON.parse(body) as unknown };
  });
}

const CONNECT = 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n';

test('a CONNECT request is answered 404 NOT_FOUND with the catalogue\'s body, and the connection closed', async () => {
  const heard = answers(await exchange(CONNECT));
  assert.deepEqual(heard, [{ status: 404, body: { error: { code: 'NOT_FOUND', message: 'no route CONNECT example.com:443: this server is no proxy' } } }]);
});

test('a message POSTed ahead of a CONNECT on the same connection is stored and answered, then the CONNECT is 404', async () => {
  const body = JSON.stringify({ to: 'tunnel-user', type: 't', data: 'before the CONNECT', client_msg_id: 'before-connect' });
  const post = `POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.client.token}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const heard = answers(await exchange(post + CONNECT));
  assert.deepEqual(heard.map((a) => a.status), [201, 404], JSON.stringify(heard));
  const history = await server.client.get('/v1/users/tunnel-user/messages');
  assert.deepEqual((history.body as { messages: { data: unknown }[] }).messages.map((m) => m.data), ['before the CONNECT']);
});

test('a CONNECT client that keeps its side open does not hold the node: its socket is closed after the answer, and the shutdown completes within the linger', { timeout: 30_000 }, async () => {
  const { hostname, port } = new URL(server.service.url);
  // allowHalfOpen: the client does not end its side when the server ends its own.
  const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
  socket.on('error', () => {});
  let heard = '';
  const answered = new Promise<void>((resolve) => socket.on('data', (chunk: Buffer) => {
    heard += chunk.toString();
    if (heard.includes('"NOT_FOUND"')) resolve();
  }));
  socket.write(CONNECT);
  await answered;
  const started = performance.now();
  // The last test of the file: the service stops here (its clean-up's close is then a no-op).
  const closed = server.service.close().then(() => performance.now() - started);
  const ms = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 15_000).unref())]);
  socket.destroy();
  assert.ok(ms < LINGER_MS + 3000, `the shutdown took ${ms} ms with a half-open CONNECT client (linger ${LINGER_MS} ms)`);
});
