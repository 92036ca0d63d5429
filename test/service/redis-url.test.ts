/**
 * PIXIU_REDIS_URL with a password, against a real password-protected `redis-server`
 * (src/redis/url.ts): the password works in the user part, as a `?password=` option
 * and in a `unix://` URL, and is never printed — not in the listening line, not in
 * the error of a wrong password (which says WRONGPASS), not in a refused URL; a
 * `unix://` URL's `?db=N` selects database N; a URL naming a server that is not Redis
 * says so (src/redis/plain-reasons.ts).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import { createRedis } from '../../src/redis/client.js';
import { cleanupList, PixiuClient, runCli, spawnServe, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

const PASSWORD = 'redis-pw-Kq7xZ93';
const API_TOKEN = 'redis-url-test-api-token-0123456789';
let redis: RedisServer;
let socket: string;
const files = cleanupList();

before(async () => {
  // The socket goes in a directory of its own, known before the server starts.
  const dir = await tempDataDir(files, 'pixiu-redis-sock-');
  socket = path.join(dir, 'redis.sock');
  redis = await RedisServer.start({ args: ['--requirepass', PASSWORD, '--unixsocket', socket, '--unixsocketperm', '700'] });
  files.after(() => redis.destroy());
});

after(() => files.run());

test('the password of a redis:// URL (user part or ?password=) or a unix:// URL is used and never printed', { timeout: 60_000 }, async (t) => {
  const urls = [
    `redis://:${PASSWORD}@127.0.0.1:${redis.port}/0`,
    `redis://127.0.0.1:${redis.port}/0?password=${PASSWORD}`,
    `unix://:${PASSWORD}@${socket}?db=0`,
  ];
  for (const [i, url] of urls.entries()) {
    const serve = await spawnServe({
      PIXIU_REDIS_URL: url, PIXIU_REDIS_PREFIX: `pw${i}:`, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0',
      PIXIU_LOG_LEVEL: 'info', PIXIU_API_TOKEN: API_TOKEN,
    }, t);
    const sent = await new PixiuClient(serve.url, API_TOKEN).post('/v1/messages', { to: 'ana', type: 't', data: { i } });
    assert.equal(sent.status, 201, `${url}: ${sent.text}`);
    const listening = serve.stdout().split('\n').find((l) => l.includes('pixiu listening')) ?? '';
    assert.match(listening, /"redis":"(redis|unix):\/\/[^"]*\*\*\*/, listening);
    assert.deepEqual(await serve.term(), { code: 0, signal: null }, serve.stderr());
    assert.ok(!serve.stdout().includes(PASSWORD) && !serve.stderr().includes(PASSWORD), `${url} printed its password:\n${serve.stdout()}${serve.stderr()}`);
  }
});

test('a wrong password is a start-up error saying WRONGPASS, without the password', { timeout: 60_000 }, async (t) => {
  const wrong = 'not-the-pw-8Hd2';
  for (const url of [`redis://127.0.0.1:${redis.port}/0?password=${wrong}`, `unix://:${wrong}@${socket}`]) {
    const run = await runCli(['serve'], {
      PIXIU_REDIS_URL: url, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN,
    });
    assert.equal(run.code, 1, url);
    assert.match(run.stderr, /Redis at .*\*\*\*.* refused the connection's credentials: WRONGPASS/, url);
    assert.doesNotMatch(run.stderr, /cannot reach/, 'Redis was reached');
    assert.ok(!run.stderr.includes(wrong) && !run.stdout.includes(wrong), `${url} printed its password:\n${run.stdout}${run.stderr}`);
  }
});

test('a Redis URL that cannot be read is refused before start-up, naming the setting and not the value', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['redis://admin:hunter2-%zz@127.0.0.1:6379/0', /the password has a % that does not start a valid percent-encoding/],
    ['redis://admin:hunter2-secret@127.0.0.1:notaport/0', /not a URL that can be read/],
    ['redis://admin:hunter2-secret@127.0.0.1:6379/zero', /database number/],
    ['unix://:hunter2-secret@', /needs the socket path/],
  ];
  for (const [url, expected] of cases) {
    const dataDir = await tempDataDir(t);
    const run = await runCli(['serve'], { PIXIU_REDIS_URL: url, PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0' });
    assert.equal(run.code, 1, url);
    assert.match(run.stderr, /PIXIU_REDIS_URL is not valid: /, url);
    assert.match(run.stderr, expected, url);
    assert.ok(!run.stderr.includes('hunter2') && !run.stdout.includes('hunter2'), `${url} was printed:\n${run.stderr}`);
    // Refused before anything started: no secrets were generated and printed.
    assert.doesNotMatch(run.stdout + run.stderr, /generated the/, url);
  }
});

test('a unix:// URL\'s ?db=N selects database N: a write through Pixiu\'s client lands there, not in database 0', async (t) => {
  const client = await createRedis({ url: `unix://:${PASSWORD}@${socket}?db=5`, commandTimeoutMs: 2000 });
  t.after(() => client.disconnect());
  await client.set('unix-db-key', 'written over the socket');
  // Read back over TCP, each database on a connection of its own.
  const readIn = async (db: number): Promise<string | null> => {
    const probe = new Redis({ host: '127.0.0.1', port: redis.port, password: PASSWORD, db, lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await probe.connect();
      return await probe.get('unix-db-key');
    } finally {
      probe.disconnect();
    }
  };
  assert.equal(await readIn(5), 'written over the socket');
  assert.equal(await readIn(0), null);
});

test('a Redis URL that names a server that is not Redis (an HTTP port) says so, not ioredis\'s "Please report this."', { timeout: 30_000 }, async (t) => {
  // It answers Redis's commands as Pixiu's own port does (src/api/error-handler.ts
  // clientErrorAnswerer): one 400, then the end of its side of the connection. Node's
  // default destroys the socket at once, and the client's next write may then fail
  // (EPIPE) before it reads the answer: nothing read says what the server is.
  const http = createServer((_req, res) => res.end('not redis'));
  http.on('clientError', (_err, socket: Socket) => {
    if (!socket.writableEnded) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => http.close(() => resolve())));
  http.on('connection', (socket) => t.after(() => socket.destroy()));
  const { port } = http.address() as AddressInfo;
  const run = await runCli(['serve'], {
    PIXIU_REDIS_URL: `redis://127.0.0.1:${port}`, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN,
  });
  assert.equal(run.code, 1, run.stderr);
  const said = /the server there does not speak the Redis protocol \(it answered "H…": an HTTP server\?\)/;
  assert.match(run.stderr, new RegExp(`cannot reach Redis at redis://127\\.0\\.0\\.1:${port}: ${said.source}`), run.stderr);
  // The log line of the failed connection says the same.
  const logged = run.stdout.split('\n').find((l) => l.includes('redis connection error')) ?? '{}';
  assert.match((JSON.parse(logged) as { reason?: string }).reason ?? '', said, run.stdout);
  assert.doesNotMatch(run.stdout + run.stderr, /Please report|RESP type/);
});

test('a rediss:// URL to a Redis without TLS fails saying TLS may be why, not only "connect ETIMEDOUT"', { timeout: 30_000 }, async () => {
  const url = `rediss://:${PASSWORD}@127.0.0.1:${redis.port}`;
  await assert.rejects(createRedis({ url, commandTimeoutMs: 100 }), (err: unknown) => {
    assert.match((err as Error).message, new RegExp(`^cannot reach Redis at rediss://:\\*\\*\\*@127\\.0\\.0\\.1:${redis.port}: .+ `
      + '\\(rediss:// connects with TLS: is this Redis TLS-enabled\\? A Redis without TLS takes redis://\\)$'));
    return true;
  });
  // A redis:// URL's failures get no such hint, nor a rediss:// host that does not
  // resolve, though its name says "tls" (the reason holds the host).
  await assert.rejects(createRedis({ url: `redis://127.0.0.1:${redis.port}/99`, commandTimeoutMs: 100 }), (err: unknown) => !(err as Error).message.includes('TLS'));
  await assert.rejects(createRedis({ url: 'rediss://my-tls-redis.invalid:6390', commandTimeoutMs: 100 }), (err: unknown) => {
    assert.match((err as Error).message, /ENOTFOUND|EAI_AGAIN/);
    assert.doesNotMatch((err as Error).message, /TLS-enabled/);
    return true;
  });
});
