/**
 * The shutdown's count of the requests its grace period cut unanswered
 * (src/gateway/requests-in-flight.ts, logged by upgrade-guard.ts) counts only requests
 * still in flight: requests pipelined behind a slow one on a connection its client
 * destroyed are settled with that connection, although Node never emits `close` on
 * their responses (review 2, L1: the count stayed up for good, and every later
 * shutdown reaching the end of its grace logged them as cut).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import net from 'node:net';
import { createRedis } from '../../src/redis/client.js';
import { countRequestsInFlight } from '../../src/gateway/requests-in-flight.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startInProcessAlone } from '../harness/pixiu-server.js';

const API_TOKEN = 'requests-cut-test-api-token-0123456789';

/** The log line of the requests the end of the shutdown grace cut (src/gateway/upgrade-guard.ts). */
const CUT_UNANSWERED = 'shutdown grace period over: requests still in flight are cut unanswered (their clients see the connection close and must send them again)';

/**
 * A raw connection to `server`, and its socket on the server's side (found by the
 * client's port: the process may hold other connections to the server).
 */
async function connectRaw(server: net.Server): Promise<{ client: net.Socket; accepted: net.Socket }> {
  const seen = new Map<number, net.Socket>();
  const onConnection = (socket: net.Socket): void => { seen.set(socket.remotePort ?? 0, socket); };
  server.on('connection', onConnection);
  try {
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await once(client, 'connect');
    await waitUntil('the server accepts the connection', async () => seen.has(client.localPort ?? -1), 5_000, 5);
    return { client, accepted: seen.get(client.localPort ?? -1) as net.Socket };
  } finally {
    server.off('connection', onConnection);
  }
}

/** Writes `text` on a new raw connection, destroys it once the kernel has it all, and resolves once the server's side has closed. */
async function writeAndLeave(server: net.Server, text: string): Promise<void> {
  const { client, accepted } = await connectRaw(server);
  const closed = once(accepted, 'close');
  await new Promise<void>((resolve, reject) => client.write(text, (err) => (err ? reject(err) : resolve())));
  client.destroy();
  await closed;
}

const get = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;

test('requests pipelined behind a slow one on a connection its client destroyed are no longer counted in flight, and none is counted twice', { timeout: 30_000 }, async (t: TestContext) => {
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    if (req.url === '/slow') held.push(res);
    else res.end('ok');
  });
  const inFlight = countRequestsInFlight(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise((resolve) => server.close(resolve)));

  // One request answered first on the same connection: the connection's own 'close'
  // listener (added at its first request) then runs before the one Node adds for the
  // slow answer, which emits that answer's 'close' after the connection's was counted.
  const { client, accepted } = await connectRaw(server);
  const closed = once(accepted, 'close');
  client.write(get('/b'));
  await once(client, 'data');
  await waitUntil('the answer settled', async () => inFlight.count === 0, 5_000, 5);
  await new Promise<void>((resolve, reject) => client.write(get('/slow') + get('/c') + get('/d'), (err) => (err ? reject(err) : resolve())));
  await waitUntil('the requests arrived', async () => inFlight.count === 3, 5_000, 5);
  client.destroy();
  await closed;
  assert.equal(held.length, 1, 'the slow request arrived');
  assert.equal(inFlight.count, 0, 'the slow request and the two queued behind it are settled with their connection');
  // The slow one's handler answers late, to a connection that is gone.
  (held[0] as http.ServerResponse).end('late');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(inFlight.count, 0, 'nothing settled twice');
});

test('a shutdown reaching the end of its grace with no request in flight logs none cut, after a client pipelined requests behind a slow one and left', { timeout: 60_000 }, async (t: TestContext) => {
  const { logger, lines } = capturingLogger();
  const { redis, server } = await startInProcessAlone(t, { apiToken: API_TOKEN }, logger);
  const { service } = server;
  // The POST waits on its Redis write (paused), and the two GETs pipelined behind it wait
  // for its answer; the client leaves meanwhile.
  const probe = await createRedis({ url: redis.url, commandTimeoutMs: 2000 });
  try {
    await probe.client('PAUSE', '20000', 'WRITE');
    const body = JSON.stringify({ to: 'pia', type: 't', data: 1 });
    await writeAndLeave(service.app.server, [
      'POST /v1/messages HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${API_TOKEN}`, 'Content-Type: application/json',
      `Content-Length: ${Buffer.byteLength(body)}`, '', body,
    ].join('\r\n') + get('/healthz') + get('/healthz'));
  } finally {
    await probe.client('UNPAUSE');
    await probe.quit();
  }

  // A client whose request line and headers never end (not a request yet: not in
  // flight) holds the close open until the grace period ends.
  const { client: slow, accepted } = await connectRaw(service.app.server);
  t.after(() => slow.destroy());
  slow.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  const slowClosed = once(accepted, 'close');

  await service.close();
  await slowClosed; // cut at the end of the grace: the warn line, if any, is written
  assert.deepEqual(lines.filter((l) => l.msg === CUT_UNANSWERED).map((l) => l.requests), [], 'no request was in flight');
});
