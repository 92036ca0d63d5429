/**
 * The drain delay of `pixiu serve` (PIXIU_DRAIN_DELAY; src/cli/serve.ts, docs/decisions.md
 * "Drain delay"): after SIGTERM, `/readyz` answers 503 for that long while requests,
 * WebSockets and delivery go on as before, so that a load balancer polling it takes the
 * node out before its listener closes; then the usual shutdown runs and serve exits 0.
 * A second signal during the delay ends it; SIGINT (Ctrl-C) and the default of 0 stop at
 * once, as before (checked in shutdown.test.ts) (an SRE saw `/readyz` go from 200 to connection refused, never 503).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { DRAINING } from '../../src/api/routes/health.js';
import { REPEATED_SIGNAL_MS } from '../../src/cli/stop-signals.js';
import { waitUntil } from '../harness/checks.js';
import { logLines } from '../harness/log-capture.js';
import { spawnServe, tempDataDir, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';

const API_TOKEN = 'drain-delay-test-api-token-0123456789';
const JWT_SECRET = 'drain-delay-test-jwt-secret-0123456789abcdef';

/** `pixiu serve` on its own Redis and data dir, with `env` added. */
async function serve(t: TestContext, env: Record<string, string>): Promise<ServeProcess> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  return spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_LOG_LEVEL: 'info', ...env,
  }, t);
}

/** Resolves once serve has logged `shutting down` (the signal is being handled); returns that line. */
async function shuttingDown(node: ServeProcess): Promise<Record<string, unknown>> {
  await waitUntil('the shutting down line', async () => logLines(node.stdout(), 'shutting down').length > 0, 10_000);
  return logLines(node.stdout(), 'shutting down')[0] as Record<string, unknown>;
}

function post(url: string, to: string, data: unknown): Promise<Response> {
  return fetch(`${url}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to, type: 't', data }),
  });
}

test('with PIXIU_DRAIN_DELAY, after SIGTERM /readyz answers 503 while a POST is stored and delivered to an open WebSocket; then serve stops, exit 0', { timeout: 60_000 }, async (t: TestContext) => {
  const DELAY_MS = 2_000;
  const node = await serve(t, { PIXIU_DRAIN_DELAY: `${DELAY_MS}ms` });
  assert.equal((await fetch(`${node.url}/readyz`)).status, 200);
  const client = await TestClient.connect(node.url, { token: await testToken({ kind: 'secret', secret: JWT_SECRET }, 'dora'), params: { device: 'phone' } });
  t.after(() => client.close());
  await client.nextOf('welcome');

  const signalled = performance.now();
  node.proc.kill('SIGTERM');
  const line = await shuttingDown(node);
  assert.deepEqual([line.signal, line.drainDelayMs], ['SIGTERM', DELAY_MS]);

  const ready = await fetch(`${node.url}/readyz`);
  assert.equal(ready.status, 503);
  assert.equal(ready.headers.get('retry-after'), '1');
  assert.deepEqual(await ready.json(), { error: { code: 'UNAVAILABLE', message: DRAINING } });
  assert.equal((await fetch(`${node.url}/healthz`)).status, 200, 'alive all the same');
  // Served as before; the answer ends its connection, so the producer's next request
  // goes through the load balancer again.
  const sent = await post(node.url, 'dora', { during: 'drain' });
  assert.equal(sent.status, 201, await sent.clone().text());
  assert.equal(sent.headers.get('connection'), 'close');
  const [frame] = await client.msgs(1, { ack: true });
  assert.deepEqual(frame?.data, { during: 'drain' }, 'delivered on the open WebSocket');
  assert.ok(performance.now() - signalled < DELAY_MS, 'all of it within the delay (a slow machine: raise DELAY_MS)');

  // Then the shutdown: the WebSocket closed 1001, exit 0, no sooner than the delay.
  assert.equal((await client.waitClose()).code, 1001);
  assert.deepEqual(await node.exited, { code: 0, signal: null }, node.stderr());
  assert.ok(performance.now() - signalled >= DELAY_MS - 50, `stopped ${Math.round(performance.now() - signalled)} ms after SIGTERM`);
  assert.equal(logLines(node.stdout(), 'drain delay over, shutting down').length, 1, node.stdout());
  assert.equal(logLines(node.stdout(), 'pixiu stopped').length, 1);
});

test('a second SIGTERM during the drain delay ends it: the graceful shutdown runs at once and serve exits 0', { timeout: 60_000 }, async (t: TestContext) => {
  const node = await serve(t, { PIXIU_DRAIN_DELAY: '10m' });
  node.proc.kill('SIGTERM');
  await shuttingDown(node);
  assert.equal((await fetch(`${node.url}/readyz`)).status, 503);
  // A repeat within REPEATED_SIGNAL_MS is the same signal (npm passes it on): wait past it.
  await delay(REPEATED_SIGNAL_MS + 100);
  const again = performance.now();
  node.proc.kill('SIGTERM');
  assert.deepEqual(await node.exited, { code: 0, signal: null }, node.stderr());
  assert.ok(performance.now() - again < 15_000);
  assert.equal(logLines(node.stdout(), 'drain delay cut short by a second signal, shutting down').length, 1, node.stdout());
  assert.equal(logLines(node.stdout(), 'pixiu stopped').length, 1);
  assert.deepEqual(logLines(node.stdout(), 'second signal, exiting now'), [], 'not the forced exit');
});

// SIGINT with a drain delay set, and SIGTERM without one, stop at once: pinned in
// shutdown.test.ts (the Ctrl-C test runs with PIXIU_DRAIN_DELAY=10m, the in-flight POST
// test with none), on serve processes those tests start anyway.
