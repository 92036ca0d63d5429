/**
 * What an idle connection's sockets hold besides the connection's own state: the
 * server's TCP socket under an open WebSocket carries no listener made for that socket
 * (each is one function shared by every connection), and the `ws` WebSocket no close
 * listener but the connection's own. bench:e2e case (c) counts every byte of an idle
 * connection (issue 4: at most 12 KiB of RSS each): the upgrade guard's `once` close
 * listener (a closure, a bound wrapper and its state) and `ws`'s client tracking (a
 * close listener and a set entry per socket) cost ~400 bytes of heap each
 * (bench/README.md, 2026-12-05 memtrim).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import type { EventEmitter } from 'node:events';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { serverSockets, startGateway, type GatewayFixture } from './gateway-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
let sockets: Map<string, Duplex>;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'idle-listeners:' });
  sockets = serverSockets(gw);
});

after(async () => {
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});

/** Each event's listeners of `emitter`, by event name. */
function listenersOf(emitter: EventEmitter): Map<string | symbol, Function[]> {
  return new Map(emitter.eventNames().map((name) => [name, emitter.listeners(name)]));
}

/** The `ws` WebSocket on the server's end of `socket` (`ws` keeps it under a symbol of its own). */
function webSocketOf(socket: Duplex): EventEmitter {
  const key = Object.getOwnPropertySymbols(socket).find((s) => s.description === 'websocket');
  const ws = key === undefined ? undefined : (socket as unknown as Record<symbol, EventEmitter | undefined>)[key];
  assert.ok(ws, 'ws keeps no WebSocket on the socket');
  return ws;
}

test('two idle connections: their TCP sockets share every listener, and each WebSocket has one close listener', async () => {
  await gw.connectWelcomed('idle-a', { device: 'a' });
  await gw.connectWelcomed('idle-b', { device: 'b' });
  const [a, b] = [sockets.get('a'), sockets.get('b')];
  assert.ok(a && b, 'both upgrades seen');
  const [la, lb] = [listenersOf(a), listenersOf(b)];
  assert.deepEqual([...la.keys()].sort(), [...lb.keys()].sort());
  for (const [name, fns] of la) {
    const other = lb.get(name) ?? [];
    assert.equal(fns.length, other.length, `listeners of '${String(name)}'`);
    fns.forEach((fn, i) => assert.equal(fn, other[i], `listener ${i} of '${String(name)}' (${fn.name || 'anonymous'}) is made per socket`));
  }
  for (const socket of [a, b]) assert.equal(webSocketOf(socket).listenerCount('close'), 1);
});
