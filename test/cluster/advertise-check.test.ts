/**
 * The start-up check of the advertised URL (src/cluster/advertise-check.ts, DESIGN.md
 * §9): a node whose PIXIU_ADVERTISE_URL leads to another node, or to something that is
 * not a node of its cluster, or whose port fetch refuses (the WHATWG bad ports), refuses
 * to start; one whose URL nothing answers from here starts with a warning. Real
 * services in this process on one private redis-server (or their embedded one).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import { Redis } from 'ioredis';
import type { AddressInfo } from 'node:net';
import { checkAdvertisedUrl } from '../../src/cluster/advertise-check.js';
import { loadConfig } from '../../src/config/config.js';
import { StartupError } from '../../src/errors.js';
import { startService } from '../../src/service/service.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcess, tempDataDir, type CleanupContext } from '../harness/pixiu-server.js';
import { RedisServer, freePort } from '../harness/redis-server.js';

let redis: RedisServer;
const files = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  files.after(() => redis.destroy());
});

after(() => files.run());

/** Starts a node on the shared Redis under `prefix` that advertises `advertiseUrl`. */
async function startAdvertising(t: CleanupContext, prefix: string, advertiseUrl: string) {
  const { logger, lines } = capturingLogger();
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir: await tempDataDir(t), redisUrl: redis.url, redisPrefix: prefix, storeDurability: 'relaxed', advertiseUrl, redisCommandTimeoutMs: '500' });
  const start = startService(config, logger);
  start.then((service) => t.after(() => service.close()), () => undefined);
  return { start, lines };
}

test('a URL that leads to another node of the cluster refuses the start; one that leads to something else is a warning', async (t) => {
  const a = await startInProcess(t, { redisUrl: redis.url, redisPrefix: 'adv:', storeDurability: 'relaxed' });
  const other = await startAdvertising(t, 'adv:', a.service.url);
  await assert.rejects(other.start, (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, new RegExp(`the advertised URL ${a.service.url.replace(/\./g, '\\.')} reaches the node of store [0-9a-f]{16}, not this one`));
    assert.match(err.message, /set PIXIU_ADVERTISE_URL/);
    return true;
  });

  // A node of another cluster (another key prefix: another cluster secret) refuses this
  // cluster's secret with Pixiu's 401 body: a wrong URL as well.
  const foreign = await startAdvertising(t, 'adv-foreign:', a.service.url);
  await assert.rejects(foreign.start, (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, /reaches a Pixiu node of another cluster \(it refused this cluster's secret\)/);
    return true;
  });

  // A proxy not routing to this node yet (502/503), or another service: not proof of a
  // wrong URL, so the node starts and says so.
  const web: Server = createServer((_req, res) => res.writeHead(503, { 'content-type': 'text/html' }).end('<h1>no upstream</h1>'));
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => web.close(() => resolve())));
  const proxied = await startAdvertising(t, 'adv-web:', `http://127.0.0.1:${(web.address() as AddressInfo).port}`);
  await proxied.start;
  assert.ok(proxied.lines.some((l) => l.level === 40 && /answers, but not as this node \(HTTP 503/.test(l.msg ?? '')), JSON.stringify(proxied.lines.filter((l) => l.level >= 40)));
  // Still served: the refused node wrote no lease over A's.
  assert.equal((await a.client.post('/v1/messages', { to: 'ada', type: 't', data: 1 })).status, 201);
});

test('a URL nothing answers from this node starts with a warning', async (t) => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const node = await startAdvertising(t, 'adv-far:', `http://127.0.0.1:${port}`);
  await node.start;
  const warning = node.lines.find((l) => l.level === 40 && /advertised URL does not reach this node from itself/.test(l.msg ?? ''));
  assert.ok(warning !== undefined, JSON.stringify(node.lines.filter((l) => l.level >= 40)));
  assert.equal(warning.url, `http://127.0.0.1:${port}`);
});

test('the check waits on a timeout of its own, not PIXIU_REDIS_COMMAND_TIMEOUT: a short legal one does not make a slow URL to this node a warning', async (t) => {
  const port = await freePort();
  // This node at its URL, answering 300 ms late (a slow hop: a proxy, a busy machine),
  // three times the node's Redis command timeout.
  const slow: Server = createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (chunk: Buffer) => body.push(chunk)).on('end', () => setTimeout(() => {
      const forward = request({ host: '127.0.0.1', port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      forward.on('error', () => res.writeHead(502).end()).end(Buffer.concat(body));
    }, 300));
  });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { slow.closeAllConnections(); slow.close(() => resolve()); }));
  const { logger, lines } = capturingLogger();
  const config = loadConfig({}, {
    port: String(port), claimsSettleMs: '0', dataDir: await tempDataDir(t), redisUrl: redis.url, redisPrefix: 'adv-slow:', storeDurability: 'relaxed',
    advertiseUrl: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`, redisCommandTimeoutMs: '100',
  });
  const service = await startService(config, logger);
  t.after(() => service.close());
  assert.deepEqual(lines.filter((l) => /advertised URL/.test(l.msg ?? '')).map((l) => l.msg), []);
});

test('a URL that answers nothing within the check\'s timeout is a warning naming that timeout, not fetch\'s bare "aborted due to timeout"', async (t) => {
  const silent: Server = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { silent.closeAllConnections(); silent.close(() => resolve()); }));
  const { logger, lines } = capturingLogger();
  const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  await checkAdvertisedUrl({ url, storeId: '0123456789abcdef', authHeader: 'Bearer x', timeoutMs: 100, logger });
  const warning = lines.find((l) => l.level === 40 && /advertised URL does not reach this node from itself/.test(l.msg ?? ''));
  assert.equal(warning?.reason, 'no answer within 100 ms (the check\'s timeout)', JSON.stringify(lines));
});

test('a stop signal during the check of a URL that does not answer gives the start up at once, not after the check\'s timeout', async (t) => {
  const stop = new AbortController();
  let askedAt = 0;
  // Answers nothing: the check waits on it until its timeout, or until the stop.
  const silent: Server = createServer(() => {
    askedAt = performance.now();
    stop.abort();
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { silent.closeAllConnections(); silent.close(() => resolve()); }));
  const config = loadConfig({}, {
    port: '0', claimsSettleMs: '0', dataDir: await tempDataDir(t), redisUrl: redis.url, redisPrefix: 'adv-stop:', storeDurability: 'relaxed',
    advertiseUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, redisCommandTimeoutMs: '10000',
  });
  const { logger, lines } = capturingLogger();
  await assert.rejects(startService(config, logger, undefined, { signal: stop.signal }), StartupError);
  assert.ok(askedAt > 0, 'the check asked the URL');
  const tookMs = performance.now() - askedAt;
  assert.ok(tookMs < 3000, `gave up ${Math.round(tookMs)} ms after the stop`);
  // The stop is not a verdict on the URL: nothing is said about it.
  assert.deepEqual(lines.filter((l) => /advertised URL/.test(l.msg ?? '')).map((l) => l.msg), []);
});

test('a port fetch refuses (the WHATWG fetch standard\'s bad ports) refuses the start on a shared Redis, saying what it means; alone on the embedded Redis it starts', { timeout: 60_000 }, async (t) => {
  // Nothing listens at these ports: fetch refuses them before connecting.
  const shared = await startAdvertising(t, 'adv-bad:', 'http://127.0.0.1:22');
  await assert.rejects(shared.start, (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, /^the advertised URL http:\/\/127\.0\.0\.1:22 has port 22, which fetch, the HTTP client the other Pixiu nodes read this node's messages with, refuses to ask: it is on the WHATWG fetch standard's list of bad ports/);
    assert.match(err.message, /listen on another port \(PIXIU_PORT, --port\) or set PIXIU_ADVERTISE_URL/);
    return true;
  });
  assert.deepEqual(shared.lines.filter((l) => /advertised URL/.test(l.msg ?? '')).map((l) => l.msg), [], 'no warning besides the refusal');
  // Refused before the store's claim: no block of partitions taken for it (checked before it starts listening).
  const probe = new Redis(redis.url);
  t.after(() => probe.quit());
  assert.equal(await probe.hlen('adv-bad:xiu:{store}:stores'), 0, 'no store claimed a block');
  assert.equal(shared.lines.some((l) => l.msg === 'store partitions claimed'), false);

  // The embedded Redis is a socket in the data dir: no other node reads this one.
  const { logger, lines } = capturingLogger();
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir: await tempDataDir(t), storeDurability: 'relaxed', advertiseUrl: 'http://127.0.0.1:6666' });
  const alone = await startService(config, logger);
  t.after(() => alone.close());
  assert.deepEqual(lines.filter((l) => l.level >= 40 && /advertised URL/.test(l.msg ?? '')).map((l) => l.msg), []);
  const said = lines.find((l) => l.level === 30 && /advertised URL's port is one fetch refuses/.test(l.msg ?? ''));
  assert.equal(said?.port, 6666, JSON.stringify(lines.filter((l) => /advertised/.test(l.msg ?? ''))));
});
