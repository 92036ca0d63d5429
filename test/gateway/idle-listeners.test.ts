/**
 * What an idle connection's sockets hold besides the connection's own state: neither
 * the server's TCP socket under an open WebSocket nor the `ws` WebSocket carries a
 * listener made for that connection; each is one function shared by every connection.
 * bench:e2e case (c) counts every byte of an idle connection (issue 4: at most 12 KiB of
 * RSS each): the upgrade guard's `once` close listener (a closure, a bound wrapper and
 * its state), `ws`'s client tracking (a close listener and a set entry per socket) and
 * the connection's five WebSocket listeners (closures with their context) cost ~630
 * bytes of heap together (bench/README.md, 2026-12-05 memtrim).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import type { EventEmitter } from 'node:events';
import { fileRedis } from '../harness/file-redis.js';
import { serverSockets, startGateway, type GatewayFixture } from './gateway-fixture.js';

let gw: GatewayFixture;
let sockets: Map<string, Duplex>;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: 'idle-listeners:' });
  sockets = serverSockets(gw);
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

/** Asserts that `a` and `b` have the same listeners, the same functions, for every event. */
function assertSharedListeners(a: EventEmitter, b: EventEmitter, what: string): void {
  const [la, lb] = [listenersOf(a), listenersOf(b)];
  assert.deepEqual([...la.keys()].map(String).sort(), [...lb.keys()].map(String).sort(), `${what}: the events listened to`);
  for (const [name, fns] of la) {
    const other = lb.get(name) ?? [];
    assert.equal(fns.length, other.length, `${what}: listeners of '${String(name)}'`);
    fns.forEach((fn, i) => assert.equal(fn, other[i], `${what}: listener ${i} of '${String(name)}' (${fn.name || 'anonymous'}) is made per connection`));
  }
}

test('two idle connections: their TCP sockets and their WebSockets share every listener (none is made per connection)', async () => {
  await gw.connectWelcomed('idle-a', { device: 'a' });
  await gw.connectWelcomed('idle-b', { device: 'b' });
  const [a, b] = [sockets.get('a'), sockets.get('b')];
  assert.ok(a && b, 'both upgrades seen');
  assertSharedListeners(a, b, 'the TCP sockets');
  assertSharedListeners(webSocketOf(a), webSocketOf(b), 'the WebSockets');
  assert.equal(webSocketOf(a).listenerCount('close'), 1, 'one close listener: the connection\'s');
});
