/**
 * The JWKS is fetched once the node listens (src/service/service.ts `prefetchJwks`):
 * a wrong `PIXIU_JWKS_URL` is a warning in the start's log, naming the URL and what it
 * answered, where it was found only when the first client was refused 503; a good one
 * is logged with its number of usable keys. The start does not wait for it.
 */
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service/service.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

let redis: RedisServer;
before(async () => {
  redis = await RedisServer.start();
});
after(() => redis.destroy());

/** Serves `answer` ([status, body]) at every path of 127.0.0.1; closed at the test's end. */
async function serve(t: TestContext, answer: [number, string]): Promise<string> {
  const server = http.createServer((_req, res) => res.writeHead(answer[0], { 'content-type': 'application/json' }).end(answer[1]));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
}

/** Starts a node on `jwksUrl` and answers its JWKS log line (after 'pixiu listening'). */
async function startAndReadJwksLine(t: TestContext, jwksUrl: string, prefix: string): Promise<LogLine & { url: string }> {
  const { logger, lines } = capturingLogger();
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir: await tempDataDir(t), redisUrl: redis.url, redisPrefix: `${prefix}:`, storeDurability: 'relaxed', jwksUrl });
  const service = await startService(config, logger);
  t.after(() => service.close());
  let line: LogLine | undefined;
  await waitUntil('the JWKS fetch is logged', async () => {
    // The fetch's own line: not the warning of a key left out of the set (jwks-unusable-keys.test.ts).
    line = lines.find((l) => l.msg === 'JWKS fetched' || /^cannot fetch the JWKS/.test(l.msg ?? ''));
    return line !== undefined;
  });
  const listening = lines.findIndex((l) => l.msg === 'pixiu listening');
  assert.ok(listening >= 0 && listening < lines.indexOf(line as LogLine), 'logged after the node listens');
  return { ...line as LogLine, url: service.url };
}

test('a JWKS URL that answers 404 is a warning at start naming the URL and the answer', async (t) => {
  const url = await serve(t, [404, '{"error":"not found"}']);
  const line = await startAndReadJwksLine(t, url, 'jwks-404');
  assert.equal(line.level, 40);
  assert.equal(line.msg, 'cannot fetch the JWKS: clients are refused 503 until it can be fetched');
  assert.equal(line.reason, `the JWKS URL ${url} answered 404 Not Found`);
});

test('a good JWKS URL is fetched at start and logged with its number of usable keys', async (t) => {
  const { publicKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  // Two keys, one of them for encryption only: one key that can verify a token.
  const url = await serve(t, [200, JSON.stringify({ keys: [jwk, { ...jwk, kid: 'k2', use: 'enc' }] })]);
  const line = await startAndReadJwksLine(t, url, 'jwks-ok');
  assert.deepEqual([line.level, line.msg, line.keys], [30, 'JWKS fetched', 1]);
});

test('a client token refused 503 for want of the JWKS is counted in pixiu_token_keys_unavailable_total (/readyz does not look at the key source)', async (t) => {
  const url = await serve(t, [404, '{"error":"not found"}']);
  const node = await startAndReadJwksLine(t, url, 'jwks-metric');
  const counted = async (): Promise<number> => {
    const text = await (await fetch(`${node.url}/metrics`)).text();
    return Number(/^pixiu_token_keys_unavailable_total (\d+)/m.exec(text)?.[1] ?? -1);
  };
  assert.equal(await counted(), 0);
  const { privateKey } = await generateKeyPair('ES256');
  const token = await new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setSubject('ana').setExpirationTime('1h').sign(privateKey);
  for (let i = 0; i < 2; i++) {
    const answer = await fetch(`${node.url}/v1/me/messages`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(answer.status, 503, await answer.text());
  }
  assert.equal(await counted(), 2);
  assert.equal((await fetch(`${node.url}/readyz`)).status, 200);
});
