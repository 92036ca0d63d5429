/**
 * docs/examples/pixiu_producer.py, the Python producer the docs link to (walk32 P1),
 * run with the python3 on PATH against a real node and Redis: what it prints is checked
 * against the node — the message and batch it stored (`GET /v1/messages/{id}`), its
 * retry of the same `client_msg_id` answered `200 duplicate`, the error bodies it
 * reports, its retries of a 503 (after the answer's Retry-After) and of a dropped
 * connection through a stand-in front end, each with the very same body, and the
 * client token it mints, taken by a WebSocket handshake. Skipped only where no
 * python3 exists at all.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { cleanupList, REPO_ROOT, startInProcessAlone, tempDataDir, type InProcessServer } from '../harness/pixiu-server.js';
import { serveLocally } from '../harness/local-http.js';
import { Refused, TestClient } from '../harness/ws-client.js';

const EXAMPLE = path.join(REPO_ROOT, 'docs/examples/pixiu_producer.py');
const NO_PYTHON = spawnSync('python3', ['--version']).error
  ? 'no python3 on PATH: the example needs a Python 3 (its standard library only)'
  : false;

const cleanup = cleanupList();
let node: InProcessServer;
let secrets: string;

before(async () => {
  if (NO_PYTHON) return;
  node = (await startInProcessAlone(cleanup, { storeDurability: 'relaxed' })).server;
  secrets = path.join(node.config.dataDir, 'secrets');
});
after(() => cleanup.run());

/** How a run of the example ended: its exit code and what it printed. */
interface Run { code: number | null; stdout: string; stderr: string }

/**
 * Runs the example with `args`, without the test's PIXIU_ variables: the node's URL and
 * API token file are given as its docs say (--url, --api-token-file) unless `env` sets them.
 */
async function example(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PIXIU_')));
  const child = spawn('python3', [EXAMPLE, ...args], { env: { ...base, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
  child.stdin.end();
  const [code] = await once(child, 'close') as [number | null];
  return { code, stdout, stderr };
}

/** The options of `send` and `batch` for `url` (the node's unless given). */
function nodeArgs(url = node.service.url): string[] {
  return ['--url', url, '--api-token-file', path.join(secrets, 'api-token')];
}

/** The one JSON line a run printed on stdout. */
function printed(run: Run): Record<string, unknown> {
  assert.equal(run.code, 0, `exit ${String(run.code)}: ${run.stderr}`);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

/** `GET /v1/messages/{id}` on the node: the stored record. */
async function stored(id: unknown): Promise<Record<string, unknown>> {
  const answer = await node.client.get(`/v1/messages/${String(id)}`);
  assert.equal(answer.status, 200, answer.text);
  return answer.body as Record<string, unknown>;
}

test('send: the message it prints is the one the node stored; the same client_msg_id again is 200 duplicate, the same id', { skip: NO_PYTHON }, async () => {
  const args = ['send', ...nodeArgs(), '--to', 'alice', '--type', 'chat.text', '--data', '{"text": "hi from python"}', '--from', 'svc', '--client-msg-id', 'py-1'];
  const first = printed(await example(args));
  assert.equal(first.status, 201);
  assert.equal(first.duplicate, false);
  assert.deepEqual(first.recipients, [{ user: 'alice', seq: 1 }]);
  const record = await stored(first.id);
  assert.deepEqual(
    { type: record.type, from: record.from, data: record.data, client_msg_id: record.client_msg_id },
    { type: 'chat.text', from: 'svc', data: { text: 'hi from python' }, client_msg_id: 'py-1' },
  );
  assert.deepEqual((record.recipients as Array<{ user: string; seq: number }>).map((r) => [r.user, r.seq]), [['alice', 1]]);

  const again = printed(await example(args));
  assert.deepEqual(again, { ...first, status: 200, duplicate: true });
});

test('batch: each item\'s result, stored where it says; an invalid item fails alone with its documented error, and the run exits 1', { skip: NO_PYTHON }, async () => {
  const items = [
    { to: 'bob', type: 'chat.text', data: { n: 1 }, client_msg_id: 'py-b1' },
    { to: 'bob', type: 'not a type!', data: { n: 2 }, client_msg_id: 'py-b2' },
    { to: ['bob', 'carol'], type: 'chat.text', data: { n: 3 } },
  ];
  const child = spawn('python3', [EXAMPLE, 'batch', ...nodeArgs(), '-'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
  child.stdin.end(JSON.stringify(items));
  const [code] = await once(child, 'close') as [number | null];
  assert.equal(code, 1, 'an item failed');
  const { results } = JSON.parse(stdout) as { results: Array<Record<string, unknown>> };
  assert.deepEqual(results.map((r) => r.status), [201, 400, 201]);
  assert.equal((results[1]?.error as { code: string }).code, 'INVALID_REQUEST');
  assert.match((results[1]?.error as { message: string }).message, /^messages\/1\/type/);
  assert.deepEqual((await stored(results[0]?.id)).data, { n: 1 });
  const third = await stored(results[2]?.id);
  assert.deepEqual(third.data, { n: 3 });
  assert.equal(typeof third.client_msg_id, 'string', 'the example gave the item a client_msg_id of its own');
  assert.deepEqual(results[2]?.recipients, [{ user: 'bob', seq: 2 }, { user: 'carol', seq: 1 }]);
});

test('an error answer is read from its documented JSON body: the status, code and message the node gives, exit 1, no retry', { skip: NO_PYTHON }, async () => {
  const bad = await example(['send', ...nodeArgs(), '--to', 'alice', '--type', 'chat.text', '--ttl', '0']);
  const direct = await node.client.post('/v1/messages', { to: 'alice', type: 'chat.text', data: {}, ttl: 0 });
  const { error } = direct.body as { error: { code: string; message: string } };
  assert.equal(bad.code, 1);
  assert.equal(bad.stdout, '');
  assert.equal(bad.stderr.trim(), `error ${direct.status} ${error.code}: ${error.message}`);

  const refused = await example(['send', '--url', node.service.url, '--to', 'alice', '--type', 'chat.text'], { PIXIU_API_TOKEN: 'not-the-api-token-of-this-node' });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^error 401 UNAUTHORIZED: /);
});

test('a 503 is retried after its Retry-After, a dropped connection after a back-off, each with the very same body: the message is stored once', { skip: NO_PYTHON }, async () => {
  // A front end that answers the first request 503 (Retry-After: 2), drops the second's
  // connection unanswered, and passes the third to the node.
  const bodies: string[] = [];
  const times: number[] = [];
  const front = await serveLocally(cleanup, (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      bodies.push(body);
      times.push(performance.now());
      if (bodies.length === 1) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '2' });
        res.end(JSON.stringify({ error: { code: 'UNAVAILABLE', message: 'Redis is unavailable; the message may have been stored and appended anyway: retry later with the same client_msg_id, which completes it without a duplicate' } }));
      } else if (bodies.length === 2) {
        req.socket.destroy();
      } else {
        void fetch(new URL(req.url ?? '/', node.service.url), {
          method: req.method, body, headers: { authorization: req.headers.authorization ?? '', 'content-type': req.headers['content-type'] ?? '' },
        }).then(async (answer) => {
          res.writeHead(answer.status, { 'content-type': 'application/json' });
          res.end(await answer.text());
        });
      }
    });
  });
  const run = await example(['send', ...nodeArgs(front), '--to', 'dave', '--type', 'chat.text', '--data', '{"k": 1}']);
  const answer = printed(run);
  assert.equal(answer.status, 201);
  assert.equal(bodies.length, 3);
  assert.ok(bodies.every((b) => b === bodies[0]), `three identical bodies: ${bodies.join(' | ')}`);
  const sent = JSON.parse(bodies[0] as string) as { client_msg_id?: string };
  assert.match(sent.client_msg_id ?? '', /^[0-9a-f-]{36}$/, 'a client_msg_id of its own, so the retries are safe');
  assert.ok((times[1] as number) - (times[0] as number) >= 1_950, `waited the Retry-After (2 s): ${(times[1] as number) - (times[0] as number)} ms`);
  assert.match(run.stderr, /retrying in 2\.0 s: 503 UNAVAILABLE: Redis is unavailable/);
  assert.match(run.stderr, /retrying in \d+\.\d s: connection failed: /);
  const record = await stored(answer.id);
  assert.equal(record.client_msg_id, sent.client_msg_id);
  const history = await node.client.get('/v1/users/dave/messages');
  assert.equal((history.body as { messages: unknown[] }).messages.length, 1, 'stored once');
});

test('token: minted from the data dir\'s jwt-secret, or from PIXIU_JWT_SECRET, a WebSocket handshake takes it; the key read with its newline is refused', { skip: NO_PYTHON }, async (t) => {
  const fromFile = await example(['token', 'erin', '--ttl', '600', '--jwt-secret-file', path.join(secrets, 'jwt-secret')]);
  assert.equal(fromFile.code, 0, fromFile.stderr);
  const client = await TestClient.connect(node.service.url, { token: fromFile.stdout.trim(), params: { device: 'py' } });
  t.after(() => client.close());
  const welcome = await client.next();
  assert.equal(welcome.t, 'welcome');
  assert.equal(welcome.user, 'erin');

  const text = readFileSync(path.join(secrets, 'jwt-secret'), 'utf8');
  const fromEnv = await example(['token', 'erin', '--jwt-secret-file', '/nonexistent'], { PIXIU_JWT_SECRET: text.trim() });
  const second = await TestClient.connect(node.service.url, { token: fromEnv.stdout.trim(), params: { device: 'py2' } });
  t.after(() => second.close());
  assert.equal((await second.next()).user, 'erin');

  const withNewline = await example(['token', 'erin'], { PIXIU_JWT_SECRET: text });
  await assert.rejects(TestClient.connect(node.service.url, { token: withNewline.stdout.trim(), params: { device: 'py3' } }), (err: unknown) =>
    err instanceof Refused && err.status === 401 && /signature does not verify/.test(err.text));
});

test('token, send: with PIXIU_DATA_DIR set and no file given, the secrets are read from that data dir, as pixiu token reads them (walk37)', { skip: NO_PYTHON }, async (t) => {
  const env = { PIXIU_DATA_DIR: node.config.dataDir };
  const token = await example(['token', 'fay'], env);
  assert.equal(token.code, 0, token.stderr);
  const client = await TestClient.connect(node.service.url, { token: token.stdout.trim(), params: { device: 'py-dd' } });
  t.after(() => client.close());
  assert.equal((await client.next()).user, 'fay');
  const sent = printed(await example(['send', '--url', node.service.url, '--to', 'fay', '--type', 'chat.text'], env));
  assert.equal(sent.status, 201);
  assert.equal((await stored(sent.id)).type, 'chat.text');
});

test('token, send: with no secret to be had, the error names the variable and the file it looked for and how to give either, not a bare [Errno 2] (walk33 L-prod)', { skip: NO_PYTHON }, async () => {
  const token = await example(['token', 'erin', '--jwt-secret-file', '/nonexistent/jwt-secret']);
  assert.equal(token.code, 1, token.stderr);
  assert.equal(token.stdout, '');
  assert.equal(token.stderr, 'error: no key to sign the token with: PIXIU_JWT_SECRET is not set and /nonexistent/jwt-secret cannot be read '
    + '(No such file or directory): set PIXIU_JWT_SECRET to the nodes\' key, or give its file with --jwt-secret-file '
    + '(the data dir\'s secrets/jwt-secret)\n');
  const send = await example(['send', '--url', node.service.url, '--api-token-file', '/nonexistent/api-token', '--to', 'alice', '--type', 'chat.text']);
  assert.equal(send.code, 1, send.stderr);
  assert.equal(send.stderr, 'error: no API token: PIXIU_API_TOKEN is not set and /nonexistent/api-token cannot be read '
    + '(No such file or directory): set PIXIU_API_TOKEN to the nodes\' token, or give its file with --api-token-file '
    + '(the data dir\'s secrets/api-token)\n');
});

test('send --data or a batch file with NaN, Infinity or a number past a double (which json.loads takes) is refused as not JSON: exit 2 or 1 with one error line, not a traceback', { skip: NO_PYTHON }, async (t) => {
  const send = await example(['send', ...nodeArgs(), '--to', 'alice', '--type', 'chat.text', '--data', '{"x": NaN}']);
  assert.equal(send.code, 2, send.stderr);
  assert.match(send.stderr, /argument --data: not JSON: NaN \(JSON has no NaN or Infinity\)\n$/);
  assert.doesNotMatch(send.stderr, /Traceback/);
  const dir = await tempDataDir(t, 'pixiu-py-nan-');
  const file = path.join(dir, 'batch.json');
  writeFileSync(file, '[{"to": "alice", "type": "chat.text", "data": {"x": -Infinity}}]');
  const batch = await example(['batch', ...nodeArgs(), file]);
  assert.equal(batch.code, 1, batch.stderr);
  assert.equal(batch.stderr, 'error: -Infinity (JSON has no NaN or Infinity)\n');
  assert.equal(batch.stdout, '');
  // A number past a double's range parses as inf with no parse_constant call (the fidelity walk's F3: a traceback).
  const huge = await example(['send', ...nodeArgs(), '--to', 'alice', '--type', 'chat.text', '--data', '{"n": 1e400}']);
  assert.equal(huge.code, 2, huge.stderr);
  assert.match(huge.stderr, /argument --data: not JSON: 1e400 is outside the range of a double \(JSON cannot carry it back\)\n$/);
  writeFileSync(file, '[{"to": "alice", "type": "chat.text", "data": {"x": [1.5, -1e999]}}]');
  const hugeBatch = await example(['batch', ...nodeArgs(), file]);
  assert.equal(hugeBatch.code, 1, hugeBatch.stderr);
  assert.equal(hugeBatch.stderr, 'error: -1e999 is outside the range of a double (JSON cannot carry it back)\n');
});
