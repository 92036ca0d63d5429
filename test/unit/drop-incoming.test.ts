/**
 * src/drop-incoming.ts on a socket it drops from already (the pipelining bound's refusal,
 * then its lingering close): the read-and-drop is set up once, the first call's byte
 * count and cap go on, and the second call adds its time limit. A real TCP pair on
 * loopback.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { dropIncoming } from '../../src/drop-incoming.js';
import { waitUntil } from '../harness/checks.js';

/** The server's socket of a fresh loopback connection, and the client's. */
async function pair(t: TestContext): Promise<{ socket: Socket; client: Socket }> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
  client.on('error', () => undefined);
  t.after(() => { client.destroy(); server.close(); });
  const [socket] = await accepted;
  return { socket, client };
}

test('a second dropIncoming on a socket adds its time limit only: one counting listener, the first count goes on', async (t) => {
  const { socket, client } = await pair(t);
  let seen = 0;
  socket.on('data', (chunk: Buffer) => { seen += chunk.length; });

  dropIncoming(socket, { maxBytes: 1000 });
  client.write(Buffer.alloc(600));
  await waitUntil('the first 600 bytes arrive', async () => seen === 600);
  dropIncoming(socket, { maxBytes: 1000, ms: 60_000 });
  assert.equal(socket.listenerCount('data'), 2, 'this test\'s listener and one drop\'s');
  // 1,200 bytes since the first call, 600 since the second: the first count cuts it.
  const closed = once(socket, 'close');
  client.write(Buffer.alloc(600));
  await closed;
  assert.equal(seen, 1200);
});

test('the second call\'s time limit applies', async (t) => {
  const { socket } = await pair(t);
  dropIncoming(socket, { maxBytes: 1000 });
  dropIncoming(socket, { maxBytes: 1000, ms: 50 });
  await once(socket, 'close');
  assert.equal(socket.destroyed, true);
});
