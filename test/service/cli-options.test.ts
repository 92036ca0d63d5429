/**
 * What `pixiu token` and `pixiu connect` put in the tokens they mint and in the
 * connection they open (README, docs/protocol.md): `pixiu token --channels` and
 * `--tags` (each entry trimmed), and the configured audience and issuer, are the
 * token's claims; `pixiu connect --tags` makes the tagged broadcasts reach it and
 * `--from-latest` skips the history; a token read with `--token-file` is its first
 * line, and `--token` and `--token-file` exclude each other; after an inbox `reset`
 * the exit line's `last_seq` is of the new epoch, and a `gap` is acked like the
 * messages; `--host` may be an IPv6 address, and a `--sub` channel named twice is
 * one channel.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import { createVerifier } from '../../src/auth/jwt.js';
import { Keys } from '../../src/redis/keys.js';
import { spawnCli } from '../harness/cli-process.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, runCli, runEach, startInProcessAlone, tempDataDir, type CliResult, type InProcessServer } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
import type { RedisServer } from '../harness/redis-server.js';

const JWT_SECRET = 'cli-claims-tests-hs256-secret-of-32-chars';
const env = { PIXIU_JWT_SECRET: JWT_SECRET };

let redis: RedisServer;
let server: InProcessServer;
const files = cleanupList();

before(async () => {
  ({ redis, server } = await startInProcessAlone(files, { jwtSecret: JWT_SECRET }));
});

after(() => files.run());

/** Posts to `path` with the API token and asserts the 201. */
async function post(route: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const answer = await server.client.post(route, body);
  assert.equal(answer.status, 201, answer.text);
  return answer.body as Record<string, unknown>;
}

/** The frame a stdout line holds, or undefined when it is not JSON. */
function frameOf(line: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

test('pixiu token puts its --channels and --tags, each trimmed, and the configured audience and issuer in the token, warned of when its refresh frame is a byte over the frame limit; a tag with a control character is refused', async () => {
  const run = await runCli(['token', 'ann', '--channels', ' live.*.chat , news', '--tags', ' vip , beta'],
    { ...env, PIXIU_JWT_AUDIENCE: 'app', PIXIU_JWT_ISSUER: 'https://auth.example.com' });
  assert.equal(run.code, 0, run.stderr);
  const claims = await createVerifier({ kind: 'secret', secret: JWT_SECRET }, { audience: 'app', issuer: 'https://auth.example.com' })(run.stdout.trim());
  assert.deepEqual([claims.user, claims.channels, claims.tags], ['ann', ['live.*.chat', 'news'], ['vip', 'beta']]);
  // A refresh frame carrying it, {"t":"refresh","token":"…"}, is 26 bytes more than the token: one byte over the limit is warned of.
  const bytes = Buffer.byteLength(run.stdout.trim());
  const tight = await runCli(['token', 'ann', '--channels', ' live.*.chat , news', '--tags', ' vip , beta', '--max-client-frame-bytes', String(bytes + 25)],
    { ...env, PIXIU_JWT_AUDIENCE: 'app', PIXIU_JWT_ISSUER: 'https://auth.example.com' });
  assert.equal(Buffer.byteLength(tight.stdout.trim()), bytes, 'a token of the same size');
  assert.match(tight.stderr, new RegExp(`warning: a refresh frame carrying this token is ${bytes + 26} bytes, over the client frame limit of ${bytes + 25} bytes`));
  // A control character is no more a tag than a space (no broadcast filter can name it).
  const control = await runCli(['token', 'ann', '--tags', 'vip,be\u0007ta'], env);
  assert.equal(control.code, 1, control.stderr);
  assert.ok(control.stderr.includes('invalid --tags entry "be\\u0007ta"'), control.stderr);
});

test('pixiu connect --tags gets the broadcasts for its tags; --from-latest skips the history and prints only new messages', { timeout: 60_000 }, async (t) => {
  await post('/v1/messages', { to: 'gus', type: 'note', data: { old: 1 } });
  await post('/v1/messages', { to: 'gus', type: 'note', data: { old: 2 } });
  const connect = spawnCli(['connect', 'gus', '--tags', 'vip', '--from-latest', '--url', server.service.url], env, t, { detached: true });
  await connect.line((l) => frameOf(l)?.t === 'welcome', 'the welcome frame');
  const vip = await post('/v1/broadcast', { type: 'news', data: { to: 'vip' }, tags: { all: ['vip'] } });
  const marker = await post('/v1/broadcast', { type: 'news', data: { to: 'all' } });
  await connect.line((l) => frameOf(l)?.bseq === marker.bseq, 'the untagged broadcast');
  assert.ok(connect.lines().some((l) => frameOf(l)?.bseq === vip.bseq), `the vip broadcast came first: ${connect.stdout()}`);
  await post('/v1/messages', { to: 'gus', type: 'note', data: { live: 3 } });
  await connect.line((l) => frameOf(l)?.t === 'msg', 'the live msg');
  connect.signal('SIGINT', { group: true });
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  assert.deepEqual(connect.lines().filter((l) => frameOf(l)?.t === 'msg').map((l) => frameOf(l)?.seq), [3], 'no message of the history');
  assert.equal(frameOf(connect.lines().at(-1) as string)?.last_seq, 3);
});

test('pixiu connect --token-file reads the first line; an empty first line, or --token beside it, is refused before connecting', { timeout: 60_000 }, async (t) => {
  const seq = (await post('/v1/messages', { to: 'ida', type: 'note', data: { n: 1 } }) as { recipients: Array<{ seq: number }> }).recipients[0]?.seq;
  const dir = await tempDataDir(t);
  const token = await testToken({ kind: 'secret', secret: JWT_SECRET }, 'ida');
  const [withNotes, empty] = [path.join(dir, 'token-and-notes.txt'), path.join(dir, 'empty-first-line.txt')];
  await writeFile(withNotes, `${token}\nminted for ida, expires in an hour\n`);
  await writeFile(empty, `\n${token}\n`);
  // No key of its own: the token given is the only one.
  const none = { PIXIU_DATA_DIR: dir };
  const [fromFile, blank, both] = (await runEach([
    ['connect', 'ida', '--token-file', withNotes, '--count', '1', '--url', server.service.url],
    ['connect', 'ida', '--token-file', empty, '--url', server.service.url],
    ['connect', 'ida', '--token', token, '--token-file', withNotes, '--url', server.service.url],
  ], (args) => runCli(args, none))).map(([, run]) => run) as [CliResult, CliResult, CliResult];
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.ok(fromFile.stdout.split('\n').some((l) => frameOf(l)?.t === 'msg' && frameOf(l)?.seq === seq), fromFile.stdout);
  assert.equal(blank.code, 1, blank.stderr);
  assert.equal(blank.stdout, '');
  assert.match(blank.stderr, /^pixiu: --token-file .*empty-first-line\.txt holds no token on its first line/);
  assert.equal(both.code, 1, both.stderr);
  assert.equal(both.stdout, '');
  assert.match(both.stderr, /^pixiu: --token and --token-file exclude each other/);
});

test('pixiu connect acks a gap: messages whose content expired before the connection are consumed', { timeout: 60_000 }, async (t) => {
  const ids: string[] = [];
  for (let n = 1; n <= 2; n++) ids.push((await post('/v1/messages', { to: 'ivy', type: 'note', data: { n }, ttl: 1 })).id as string);
  await waitUntil('their content expired', async () => (await server.client.get(`/v1/messages/${ids[1] as string}`)).status === 404, 10_000, 100);
  const connect = spawnCli(['connect', 'ivy', '--device', 'tab', '--url', server.service.url], env, t, { detached: true });
  const gap = frameOf(await connect.line((l) => frameOf(l)?.t === 'gap', 'the gap'));
  assert.deepEqual([gap?.from, gap?.to], [1, 2]);
  const { inbox } = await openInbox(t, redis.url);
  await waitUntil('the ack of the gap is kept', async () => (await inbox.cursors('ivy')).tab === 2);
  connect.signal('SIGINT', { group: true });
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  assert.equal(frameOf(connect.lines().at(-1) as string)?.last_seq, 2);
});

test('pixiu connect --host takes an IPv6 address; --sub counts a channel named twice once', async () => {
  const hundred = Array.from({ length: 100 }, (_, i) => `c${i}`);
  const [ipv6, twice] = (await runEach([
    ['connect', 'jo', '--host', '::1', '--port', '1'],
    ['connect', 'jo', '--sub', [...hundred, 'c0'].join(','), '--host', '127.0.0.1', '--port', '1'],
  ], (args) => runCli(args, env))).map(([, run]) => run) as [CliResult, CliResult];
  // Both get as far as connecting (nothing listens on port 1).
  assert.equal(ipv6.code, 1, ipv6.stderr);
  assert.match(ipv6.stderr, /^pixiu: cannot connect to ws:\/\/\[::1\]:1: /);
  assert.equal(twice.code, 1, twice.stderr);
  assert.match(twice.stderr, /^pixiu: cannot connect to ws:\/\/127\.0\.0\.1:1: /);
});

test('pixiu connect told of a reset while connected (Redis lost the inbox) prints the last_seq of the new epoch', { timeout: 60_000 }, async (t) => {
  await post('/v1/messages', { to: 'kim', type: 'note', data: { n: 1 } });
  await post('/v1/messages', { to: 'kim', type: 'note', data: { n: 2 } });
  const connect = spawnCli(['connect', 'kim', '--url', server.service.url], env, t, { detached: true });
  await connect.line((l) => frameOf(l)?.t === 'msg' && frameOf(l)?.seq === 2, 'msg 2');
  // Lost as Redis loses it (not through the service); presence is kept, so the next message is notified.
  const { redis: admin } = await openInbox(t, redis.url);
  const keys = new Keys('px:').user('kim');
  await admin.del(keys.inbox, keys.meta, keys.ids, keys.acks);
  await post('/v1/messages', { to: 'kim', type: 'note', data: { n: 'again' } });
  await connect.line((l) => frameOf(l)?.t === 'msg' && (frameOf(l)?.data as { n?: unknown } | undefined)?.n === 'again', 'the message of the new inbox');
  connect.signal('SIGINT', { group: true });
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  const epoch = ((await server.client.get('/v1/users/kim/messages')).body as { epoch: string }).epoch;
  assert.ok(connect.lines().some((l) => frameOf(l)?.t === 'reset'), connect.stdout());
  assert.deepEqual(frameOf(connect.lines().at(-1) as string), { last_seq: 1, epoch });
});
