/**
 * The node's bound on every socket it accepts, WebSockets and plain HTTP connections
 * together (src/gateway/socket-bound.ts, connection-bound.ts `socketBound`): `pixiu serve`
 * under an open-files limit of 256 holds at most 160 sockets (the 128 WebSockets derived
 * from the limit, and an eighth of it for HTTP). Past that a new connection is closed at
 * once, counted in `pixiu_sockets_dropped_total` and logged at warn, and the node keeps the
 * descriptors it needs for itself: its Redis and store serve a producer's connection
 * already open. Once the idle sockets go, new connections are taken again. Before,
 * plain connections had no bound (secaudit F1): idle sockets with no token took every
 * descriptor, and new connections hung unanswered (EMFILE) with nothing logged.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { metricSample, waitUntil, within } from '../harness/checks.js';
import { cliEntry, spawnListening, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { logLines } from '../harness/log-capture.js';
import { SOCKETS_FULL_LINE } from '../../src/gateway/socket-bound.js';

const API_TOKEN = 'socket-bound-test-api-token';
/** The open-files limit the node runs under: walk13's and the security review's. */
const OPEN_FILES = 256;

/** One answer read on a keep-alive connection of `agent`. */
interface Answer {
  readonly status: number;
  readonly text: string;
  /** The request went on a connection that was open already. */
  readonly reused: boolean;
}

/** `method path` on `url` through `agent` (one keep-alive connection), with the API token. */
async function send(url: string, agent: http.Agent | false, method: string, path: string, body?: unknown): Promise<Answer> {
  const req = http.request(new URL(path, url), {
    method, agent, timeout: 5000,
    headers: { authorization: `Bearer ${API_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
  });
  req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 5 s`)));
  req.end(body === undefined ? undefined : JSON.stringify(body));
  const [res] = await once(req, 'response') as [http.IncomingMessage];
  let text = '';
  for await (const chunk of res) text += String(chunk);
  return { status: res.statusCode ?? 0, text, reused: req.reusedSocket };
}

/** Opens a connection that sends nothing; resolves once connected (the kernel's handshake: Node may not have taken it yet). */
async function openIdle(url: string): Promise<net.Socket> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  await once(socket, 'connect');
  return socket;
}

test('past the bound on sockets a new connection is closed at once, counted and logged; Redis and a producer\'s open connection keep working; freed, the node takes connections again', { timeout: 120_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const node = await spawnListening([...cliEntry(), 'serve'], {
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_HOST: '127.0.0.1', PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info', PIXIU_PARTITIONS: '1',
    // Idle sockets are held for the test's length: not closed by the headers timeout (10 s).
    PIXIU_HEADERS_TIMEOUT: '60s',
  }, t, 'pixiu listening', { tsx: false, openFiles: OPEN_FILES });
  const lines = (): Array<Record<string, unknown>> => node.stdout().split('\n').filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const bounded = lines().find((l) => String(l.msg).startsWith('websocket connections bounded'));
  assert.deepEqual([bounded?.maxConnections, bounded?.maxSockets, bounded?.openFilesLimit], [128, 160, OPEN_FILES]);
  const maxSockets = 160;

  // A producer's keep-alive connection, open before the node fills up.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  assert.equal((await send(node.url, agent, 'POST', '/v1/messages', { to: 'u1', type: 'note', data: {} })).status, 201);
  // The sockets the node holds: the producer's, and its own connection to itself, the
  // check of its advertised URL at start, which its HTTP client keeps alive a while (up to
  // the node's 72 s keep-alive: the test is over well before).
  const metrics = await send(node.url, agent, 'GET', '/metrics');
  const others = metricSample(metrics.text, 'pixiu_sockets') ?? 0;
  assert.ok(others >= 1 && others <= 3, String(others));
  assert.equal(metricSample(metrics.text, 'pixiu_sockets_max'), maxSockets);
  assert.equal(metricSample(metrics.text, 'pixiu_sockets_dropped_total'), 0);

  // Idle connections up to the bound, then three past it, one after another (Node takes
  // them in the order they came).
  const idle: net.Socket[] = [];
  t.after(() => { for (const socket of idle) socket.destroy(); });
  for (let i = 0; i < maxSockets - others + 3; i++) idle.push(await openIdle(node.url));
  const past = idle.slice(maxSockets - others);
  // Closed at once: not left hanging until the node runs out of descriptors.
  await within(5000, 'the connections past the bound are closed', Promise.all(past.map((s) => (s.closed ? undefined : once(s, 'close')))));
  // Held: the ones within the bound are open (the node's own count, pixiu_sockets, says
  // so below, after the producer's request).
  assert.equal(idle.slice(0, maxSockets - others).filter((s) => s.closed).length, 0, 'the sockets within the bound are held');

  // The node's Redis and store still serve the producer's open connection.
  const stored = await send(node.url, agent, 'POST', '/v1/messages', { to: 'u2', type: 'note', data: {} });
  assert.deepEqual([stored.status, stored.reused], [201, true], stored.text);
  const full = await send(node.url, agent, 'GET', '/metrics');
  assert.equal(metricSample(full.text, 'pixiu_sockets'), maxSockets);
  assert.equal(metricSample(full.text, 'pixiu_sockets_dropped_total'), 3);
  // Logged at warn, thinned: the first of the three, with the peer's address.
  const warned = logLines(node.stdout(), SOCKETS_FULL_LINE);
  assert.deepEqual(warned.map((l) => [l.level, l.maxSockets, l.peer]), [[40, maxSockets, '127.0.0.1']]);

  // Once the idle sockets go, new connections are taken: the load balancer's probe among them.
  for (const socket of idle) socket.destroy();
  await waitUntil('a new connection is taken and answered', async () => {
    try {
      return (await send(node.url, false, 'GET', '/readyz')).status === 200;
    } catch {
      return false;
    }
  });
  assert.equal((await send(node.url, false, 'POST', '/v1/messages', { to: 'u3', type: 'note', data: {} })).status, 201);
  assert.equal((await node.term()).code, 0);
});
