/**
 * A WebSocket handshake refused for its Origin says which Origin and which setting
 * (`PIXIU_ALLOWED_ORIGINS`), and is logged at warn, thinned: a browser shows the page
 * only a failed socket, so the refusal is otherwise hard to find (an integrator
 * newcomer's finding: the answer named neither, and nothing was logged). The line says
 * which rule refused it: the list when it is set, else the request's Host, which it
 * names (a doc-verifying newcomer's finding: with the list unset it blamed the list),
 * or, for an Origin that is no web origin (`null`, or one with a path or credentials), that
 * form (a browser tester's N1).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service/service.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient } from '../harness/ws-client.js';
import { expectRefused, JWT_SECRET } from './gateway-fixture.js';

const files = cleanupList();
/** The one redis-server of the file: each node has a key prefix of its own on it. */
let redis: RedisServer;
let nodes = 0;
let url: string;
let lines: LogLine[];
/** A node with PIXIU_ALLOWED_ORIGINS set. */
let listed: { url: string; lines: LogLine[] };

/**
 * A service on the file's Redis under a fresh key prefix, with a fresh data dir, its log
 * captured. Each is a node only because a node logs its first Origin refusal in an
 * interval and leaves out the rest (one log throttle per node, 10 s): every test
 * line checked is a node's first. A Redis each was not needed: one serves them all.
 */
async function startNode(settings: Record<string, string> = {}): Promise<{ url: string; lines: LogLine[] }> {
  const dataDir = await tempDataDir(files);
  const config = loadConfig({}, {
    port: '0', claimsSettleMs: '0', dataDir, redisUrl: redis.url, redisPrefix: `origin${++nodes}:`, jwtSecret: JWT_SECRET, ...settings,
  });
  const captured = capturingLogger();
  const service = await startService(config, captured.logger);
  files.after(() => service.close());
  return { url: service.url, lines: captured.lines };
}

before(async () => {
  redis = await RedisServer.start();
  // Destroyed last: the nodes close first (cleanupList runs its steps in reverse).
  files.after(() => redis.destroy());
  ({ url, lines } = await startNode());
  listed = await startNode({ allowedOrigins: 'https://app.example.com' });
});

after(() => files.run());

test('a refused Origin is named, quoted and cut, with the setting; the refusals are logged at warn, thinned', async () => {
  const refused = (origin: string): Promise<string> => expectRefused(TestClient.connect(url, { headers: { origin } }), 403, 'FORBIDDEN');
  assert.equal(await refused('http://localhost:3000'),
    'Origin "http://localhost:3000" is not allowed (PIXIU_ALLOWED_ORIGINS lists the origins allowed, scheme, host and port; unset, only an origin whose host and port are this request\'s Host, of any scheme)');
  const long = `https://${'a'.repeat(300)}.example`;
  assert.match(await refused(long), new RegExp(`^Origin "https://${'a'.repeat(92)}"… is not allowed \\(PIXIU_ALLOWED_ORIGINS`));
  const logged = lines.filter((l) => l.msg?.includes('origin') === true);
  assert.deepEqual(logged.map((l) => [l.level, l.origin]), [[40, 'http://localhost:3000']],
    'the first refusal is logged at warn, the next one within the interval is left out');
  // The list is unset: the line names the rule that refused it and the Host compared.
  assert.equal(logged[0]?.msg, "websocket handshake refused: its origin's host and port are not the request's Host (PIXIU_ALLOWED_ORIGINS unset)");
  assert.equal(logged[0]?.host, new URL(url).host);
});

test('with PIXIU_ALLOWED_ORIGINS set, a refused Origin is logged as not in the list, with no Host', async () => {
  await expectRefused(TestClient.connect(listed.url, { headers: { origin: 'https://evil.example' } }), 403, 'FORBIDDEN');
  const logged = listed.lines.filter((l) => l.msg?.includes('origin') === true);
  assert.deepEqual(logged.map((l) => [l.level, l.msg, l.origin, l.host]),
    [[40, 'websocket handshake refused: its origin is not in PIXIU_ALLOWED_ORIGINS', 'https://evil.example', undefined]]);
});

test('with PIXIU_ALLOWED_ORIGINS unset, an Origin that is no web origin (null, from a file:// page) is logged as such, not as a host and port it lacks (browser tester\'s N1)', async () => {
  const fresh = await startNode(); // its own log throttle: the first test took the unset node's line
  for (const origin of ['null', 'chrome-extension://abcdef']) {
    await expectRefused(TestClient.connect(fresh.url, { headers: { origin } }), 403, 'FORBIDDEN');
  }
  const logged = fresh.lines.filter((l) => l.msg?.includes('origin') === true);
  assert.deepEqual(logged.map((l) => [l.level, l.msg, l.origin, l.host]),
    [[40, 'websocket handshake refused: its origin is no web origin scheme://host[:port] (null: a page opened from a file, a sandboxed frame), which PIXIU_ALLOWED_ORIGINS unset never allows', 'null', undefined]]);
});

test('with PIXIU_ALLOWED_ORIGINS unset, an Origin with a path or credentials is logged as no web origin, not by the host it happens to contain', async () => {
  for (const origin of ['https://app.example.com/login', 'https://user@app.example.com']) {
    const fresh = await startNode(); // its own log throttle: one line each
    await expectRefused(TestClient.connect(fresh.url, { headers: { origin } }), 403, 'FORBIDDEN');
    const logged = fresh.lines.filter((l) => l.msg?.includes('origin') === true);
    assert.deepEqual(logged.map((l) => [l.level, l.msg, l.origin, l.host]),
      [[40, 'websocket handshake refused: its origin is no web origin scheme://host[:port] (null: a page opened from a file, a sandboxed frame), which PIXIU_ALLOWED_ORIGINS unset never allows', origin, undefined]]);
  }
});
