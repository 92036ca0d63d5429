/**
 * `Expect: 100-continue` (RFC 9110 §10.1.1; src/api/expect-continue.ts): a request
 * refused from its headers gets its final status at once, never a `100 Continue` first;
 * a request whose body will be read gets the 100, and its answer once it sends the
 * body. Over a raw socket against the real service.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { RedisServer } from '../harness/redis-server.js';
import { cleanupList, startInProcess, type InProcessServer } from '../harness/pixiu-server.js';

const files = cleanupList();
let server: InProcessServer;

before(async () => {
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  // A body that waits for a 100 never sent is a 408 after this, not a hung test.
  server = await startInProcess(files, { redisUrl: redis.url, partitions: '1', storeDurability: 'relaxed', requestTimeoutMs: '3s' });
});

after(() => files.run());

/** What the client heard: every status line in order, and the final answer's body. */
interface Heard {
  readonly statuses: number[];
  /** The final answer's status line and headers. */
  readonly head: string;
  readonly body: string;
}

/**
 * Sends `head` (ending in an empty line) on a new connection, and `body` once a
 * `100 Continue` arrives; resolves with what was heard once a final answer has
 * arrived whole (its Content-Length).
 */
function exchange(head: string, body?: string): Promise<Heard> {
  const { hostname, port } = new URL(server.service.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(head));
    let text = '';
    let sent = false;
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (!sent && body !== undefined && text.includes('HTTP/1.1 100 Continue\r\n\r\n')) {
        sent = true;
        socket.write(body);
      }
      const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
      const final = text.lastIndexOf('HTTP/1.1 ');
      if ((statuses.at(-1) ?? 100) < 200) return;
      const split = text.indexOf('\r\n\r\n', final);
      const length = /\r\ncontent-length: (\d+)/i.exec(text.slice(final, split));
      if (split < 0 || length === null || text.length < split + 4 + Number(length[1])) return;
      socket.destroy();
      resolve({ statuses, head: text.slice(final, split), body: text.slice(split + 4) });
    });
    socket.on('close', () => reject(new Error(`closed before a final answer: ${JSON.stringify(text)}`)));
  });
}

function postHead(headers: Record<string, string>, requestLine = 'POST /v1/messages HTTP/1.1'): string {
  const lines = Object.entries({ host: 'x', expect: '100-continue', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  return `${requestLine}\r\n${lines}\r\n`;
}

test('a request refused from its headers is answered at once, with no 100 Continue before it', async () => {
  const json = { 'content-type': 'application/json', 'content-length': '50' };
  const token = { authorization: `Bearer ${server.client.token}` };
  const text = { ...token, 'content-type': 'text/plain' };
  const cases: [string, Record<string, string>, number, RegExp, string?][] = [
    ['no token', json, 401, /UNAUTHORIZED/],
    ['another content type', { ...text, 'content-length': '50' }, 415, /application\/json/],
    ['a length over the limit', { ...token, 'content-type': 'application/json', 'content-length': String(server.config.maxBodyBytes + 1) }, 413, /"the request body is over the limit of 1048576 bytes \(1 MiB, PIXIU_MAX_BODY_BYTES\)"/],
    ['a chunked text body on an unknown route', { ...text, 'transfer-encoding': 'chunked' }, 404, /NOT_FOUND/, 'POST /v1/nope HTTP/1.1'],
    ['a sized text body on a route that takes none', { ...text, 'content-length': '50' }, 400, /takes no body/, 'DELETE /v1/users/u1/connections HTTP/1.1'],
  ];
  for (const [name, headers, status, message, line] of cases) {
    const heard = await exchange(postHead(headers, line));
    assert.deepEqual(heard.statuses, [status], name);
    assert.match(heard.body, message, name);
  }
});

test('a request whose body will be read hears 100 Continue, sends it, and is answered 201', async () => {
  // JSON however its media type is written (case, spaces: RFC 9110 §8.3.1), and a body of exactly the limit.
  const bodies: Array<[string, string]> = [
    ['application/json; charset=utf-8', ''],
    ['Application/JSON', ''],
    ['application/json ; charset=utf-8', ''],
    ['application/json', ' '.repeat(server.config.maxBodyBytes)],
  ];
  for (const [i, [type, padding]] of bodies.entries()) {
    const json = JSON.stringify({ to: 'continued', type: 't', data: i });
    const body = json + padding.slice(json.length);
    const heard = await exchange(postHead({
      authorization: `Bearer ${server.client.token}`, 'content-type': type, 'content-length': String(Buffer.byteLength(body)),
    }), body);
    assert.deepEqual(heard.statuses, [100, 201], `${type}, ${body.length} bytes`);
  }
  const history = await server.client.get('/v1/users/continued/messages');
  assert.deepEqual((history.body as { messages: Array<{ data: unknown }> }).messages.map((m) => m.data), bodies.map((_, i) => i));
});

test('a body the server reads though it refuses it (an unknown route, a route that takes none, a GET\'s chunked body) hears 100 Continue first, not a 408 later', async () => {
  const token = { authorization: `Bearer ${server.client.token}` };
  const json = { ...token, 'content-type': 'application/json', 'content-length': '2' };
  const cases: [string, string, Record<string, string>, string, number][] = [
    ['an unknown route', 'POST /v1/nope HTTP/1.1', json, '{}', 404],
    ['a route that takes no body', 'DELETE /v1/users/u1/connections HTTP/1.1', json, '{}', 400],
    ['an empty chunked body on a GET', 'GET /healthz HTTP/1.1', { 'transfer-encoding': 'chunked' }, '0\r\n\r\n', 200],
  ];
  for (const [name, line, headers, body, status] of cases) {
    const heard = await exchange(postHead(headers, line), body);
    assert.deepEqual(heard.statuses, [100, status], name);
  }
});

test('a request with no body hears 100 Continue and keeps its connection; an HTTP/1.0 one hears no 100 (RFC 9110 §10.1.1)', async () => {
  const plain = await exchange(postHead({}, 'GET /healthz HTTP/1.1'));
  assert.deepEqual(plain.statuses, [100, 200]);
  assert.doesNotMatch(plain.head, /\r\nconnection: close/i);
  // On an unknown route too: no body is refused unread there.
  assert.deepEqual((await exchange(postHead({}, 'GET /v1/nope HTTP/1.1'))).statuses, [100, 404]);
  const body = JSON.stringify({ to: 'old-client', type: 't', data: 1 });
  const old = await exchange(postHead({
    authorization: `Bearer ${server.client.token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)),
  }, 'POST /v1/messages HTTP/1.0') + body);
  assert.deepEqual(old.statuses, [201]);
});
