/**
 * How a connection closed 4003 stops parsing its client (src/gateway/receiver-refusals.ts
 * `dropClientBytes`, over src/drop-incoming.ts): `ws`'s receiver is taken off, and only
 * it — a 'data' listener added after the connection opened still gets every byte —; what
 * arrives is dropped, and the socket is destroyed one byte past the cap or at the time
 * limit. A real `ws` server on loopback, no Redis.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { dropClientBytes, noteFrameParsers } from '../../src/gateway/receiver-refusals.js';
import { waitUntil } from '../harness/checks.js';

/** The server side of one open WebSocket: its `ws` object, its TCP socket, and the messages `ws` parsed. */
interface Opened {
  readonly server: WebSocket;
  readonly socket: Socket;
  readonly messages: string[];
  readonly client: WebSocket;
}

/** Opens a WebSocket to a fresh `ws` server; its socket's 'data' listeners are noted as the gateway notes them at open. */
async function open(t: TestContext): Promise<Opened> {
  const http = createServer();
  const wss = new WebSocketServer({ server: http });
  const messages: string[] = [];
  const connected = new Promise<{ server: WebSocket; socket: Socket }>((resolve) => {
    wss.on('connection', (server: WebSocket, req: IncomingMessage) => {
      const socket = req.socket;
      noteFrameParsers(socket);
      server.on('message', (data) => messages.push(String(data)));
      server.on('error', () => undefined);
      resolve({ server, socket });
    });
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  const client = new WebSocket(`ws://127.0.0.1:${(http.address() as AddressInfo).port}`);
  client.on('error', () => undefined);
  t.after(() => {
    client.terminate();
    wss.close();
    http.close();
  });
  await once(client, 'open');
  return { ...(await connected), messages, client };
}

test('ws\'s receiver stops parsing, while a data listener added after the open keeps getting every byte', async (t) => {
  const { socket, messages, client } = await open(t);
  client.send('parsed');
  await waitUntil('ws parses a frame before', async () => messages.length === 1);
  let foreign = 0;
  socket.on('data', (chunk: Buffer) => { foreign += chunk.length; });
  dropClientBytes(socket, { maxBytes: 1 << 20, ms: 10_000 });
  client.send('dropped');
  // A masked text frame of 7 bytes: 2 bytes of header, 4 of mask, 7 of payload.
  await waitUntil('the foreign listener gets the frame', async () => foreign === 13);
  assert.deepEqual(messages, ['parsed'], 'ws parsed nothing after the drop began');
  assert.equal(socket.destroyed, false);
});

test('the socket is destroyed one byte past maxBytes, not before', async (t) => {
  const { socket, client } = await open(t);
  // A time limit far off: only the cap can cut it within the test.
  dropClientBytes(socket, { maxBytes: 1000, ms: 60_000 });
  // 992 bytes of payload and 8 of header (2, 2 of extended length, 4 of mask): exactly the cap, kept.
  let foreign = 0;
  socket.on('data', (chunk: Buffer) => { foreign += chunk.length; });
  client.send('x'.repeat(992));
  await waitUntil('the cap\'s worth arrives', async () => foreign === 1000);
  assert.equal(socket.destroyed, false);
  // An empty frame, 6 bytes: past the cap.
  client.send('');
  const closed = once(socket, 'close').then(() => true);
  assert.equal(await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 5000, false).unref())]), true, 'destroyed past the cap');
  assert.ok(foreign > 1000);
});

test('the socket is destroyed at the time limit when the client sends nothing more', async (t) => {
  const { socket } = await open(t);
  const from = performance.now();
  dropClientBytes(socket, { maxBytes: 1000, ms: 200 });
  await once(socket, 'close');
  assert.ok(performance.now() - from >= 190, 'not before its time');
});
