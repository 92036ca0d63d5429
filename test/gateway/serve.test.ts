/**
 * The gateway through the real command line: SIGTERM on `pixiu serve` closes every
 * socket 1001, persists the last acked cursors and exits 0 (DESIGN.md §6); and
 * `pixiu connect <uid>` prints each frame as a JSON line, acks, and ends with the
 * `last_seq` and `epoch` to resume with.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openInbox, waitUntil } from '../harness/checks.js';
import { PixiuClient, runCli, spawnServe, tempDataDir, type CleanupContext } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken, type Frame } from '../harness/ws-client.js';
import { JWT_KEY, JWT_SECRET, expectPong } from './gateway-fixture.js';

const API_TOKEN = 'gateway-serve-test-api-token';
const USERS = 20;

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/** `pixiu serve` on the test Redis under `prefix`, with a known API token; `jwt`: the known JWT secret too. */
async function serve(t: CleanupContext, prefix: string, jwt: boolean): Promise<{ proc: Awaited<ReturnType<typeof spawnServe>>; api: PixiuClient; dataDir: string }> {
  const dataDir = await tempDataDir(t);
  const proc = await spawnServe({
    PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: prefix, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0',
    PIXIU_API_TOKEN: API_TOKEN, PIXIU_LOG_LEVEL: 'info', ...(jwt ? { PIXIU_JWT_SECRET: JWT_SECRET } : {}),
  }, t);
  return { proc, api: new PixiuClient(proc.url, API_TOKEN), dataDir };
}

/** Posts `count` messages to every one of `users` (one request each). */
async function postToAll(api: PixiuClient, users: readonly string[], count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const answer = await api.post('/v1/messages', { to: users, type: 'note', data: { i } });
    assert.equal(answer.status, 201, answer.text);
  }
}

describe('the command line', { concurrency: true }, () => {
  test('SIGTERM closes every client 1001, persists the last acked cursors, and exits 0', { timeout: 60_000 }, async (t) => {
    const { proc, api } = await serve(t, 'term:', true);
    const users = Array.from({ length: USERS }, (_, i) => `term-${i}`);
    await postToAll(api, users, 3);
    const clients: TestClient[] = [];
    for (const user of users) {
      const client = await TestClient.connect(proc.url, { token: await testToken(JWT_KEY, user), params: { device: 'phone' } });
      clients.push(client);
      t.after(() => client.close());
    }
    // Each client acks a different seq; a pong after the ack means the server has it.
    await Promise.all(clients.map(async (client, i) => {
      await client.msgs(3);
      client.ack((i % 3) + 1);
      await expectPong(client);
    }));
    const exit = await proc.term();
    assert.deepEqual(exit, { code: 0, signal: null }, proc.stderr());
    for (const [i, client] of clients.entries()) {
      assert.equal((await client.waitClose()).code, 1001, users[i]);
    }
    const { inbox } = await openInbox(t, redis.url, 'term:');
    for (const [i, user] of users.entries()) {
      assert.deepEqual(await inbox.cursors(user), { phone: (i % 3) + 1 }, user);
    }
  });

  test('pixiu connect <uid> --count 3 prints the frames as JSON lines, acks, and ends with last_seq and epoch', { timeout: 60_000 }, async (t) => {
    const { proc, api, dataDir } = await serve(t, 'cli:', false);
    await postToAll(api, ['cleo'], 3);
    // The CLI mints its token with the secret the server generated in the shared data dir.
    const env = { PIXIU_DATA_DIR: dataDir };
    const run = await runCli(['connect', 'cleo', '--count', '3', '--url', proc.url], env);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as Frame | { last_seq: number; epoch: string });
    const last = lines.pop();
    const frames = lines as Frame[];
    assert.equal(frames[0]?.t, 'welcome');
    assert.equal(frames[0]?.user, 'cleo');
    assert.equal(frames[0]?.device, 'cli');
    const msgs = frames.filter((f) => f.t === 'msg');
    assert.deepEqual(msgs.map((m) => m.seq), [1, 2, 3]);
    assert.deepEqual(msgs.map((m) => m.data), [{ i: 0 }, { i: 1 }, { i: 2 }]);
    const epoch = (await api.get('/v1/users/cleo/messages')).body as { epoch: string };
    assert.deepEqual(last, { last_seq: 3, epoch: epoch.epoch });
    assert.equal(frames[0]?.epoch, epoch.epoch);
    // It acked what it printed.
    const { inbox } = await openInbox(t, redis.url, 'cli:');
    await waitUntil('the CLI\'s acks are written', async () => (await inbox.cursors('cleo')).cli === 3);

    // Resuming with the printed values gets only what came after.
    await postToAll(api, ['cleo'], 1);
    const resumed = await runCli(['connect', 'cleo', '--count', '1', '--url', proc.url, '--last-seq', '3', '--epoch', epoch.epoch, '--device', 'other'], env);
    assert.equal(resumed.code, 0, resumed.stderr);
    const out = resumed.stdout.trim().split('\n').map((l) => JSON.parse(l) as Frame);
    assert.deepEqual(out.filter((f) => f.t === 'msg').map((m) => m.seq), [4]);
    assert.deepEqual(out.at(-1), { last_seq: 4, epoch: epoch.epoch });

    // A refusal before the upgrade is an exit 1 with the server's answer (a path it
    // does not serve; a bad --device is refused before connecting, cli-connect.test.ts).
    const refused = await runCli(['connect', 'cleo', '--url', `${proc.url}/not-pixiu`], env);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /HTTP 404 .*NOT_FOUND/);

    // --count 2 with 6 waiting: exactly 2 printed, and last_seq is the last one acked.
    await postToAll(api, ['dina'], 6);
    const counted = await runCli(['connect', 'dina', '--count', '2', '--url', proc.url], env);
    assert.equal(counted.code, 0, counted.stderr);
    const printed = counted.stdout.trim().split('\n').map((l) => JSON.parse(l) as Frame);
    assert.deepEqual(printed.filter((f) => f.t === 'msg').map((m) => m.seq), [1, 2]);
    assert.equal((printed.at(-1) as { last_seq?: number }).last_seq, 2);
    await waitUntil('the CLI acked 2', async () => (await inbox.cursors('dina')).cli === 2);
  });

  test('pixiu connect --count with anything but a positive whole number exits 1 naming --count', async (t) => {
    const env = { PIXIU_DATA_DIR: await tempDataDir(t) };
    for (const count of ['abc', '0']) {
      const run = await runCli(['connect', 'cleo', '--count', count, '--url', 'http://127.0.0.1:9'], env);
      assert.equal(run.code, 1, count);
      assert.match(run.stderr, new RegExp(`invalid --count "${count}"`));
    }
  });
});
