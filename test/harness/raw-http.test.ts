/**
 * raw-http.ts `rawRequest` reads whatever a peer sends: a head line with no `:` (a read
 * cut off by `waitMs` mid-header, a peer that does not speak HTTP) still gives the
 * status and body, where building its headers threw a TypeError in the socket's
 * `close` handler, an uncaught exception that took down the test file (reread-ops 10).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { rawRequest } from './raw-http.js';

test('rawRequest answers the status and body of a head with a line that is no header, not an uncaught TypeError', async (t) => {
  const server = net.createServer((socket) => {
    socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\nnot a header line\r\n\r\n{"ok":true}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as net.AddressInfo;
  const answer = await rawRequest(`http://127.0.0.1:${port}/`, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.equal(answer.status, 200);
  assert.deepEqual(answer.body, { ok: true });
  assert.equal(answer.head, 'HTTP/1.1 200 OK\r\nnot a header line');
  assert.equal(answer.closedByServer, true);
});
