import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { bareDurationSettings, loadConfig, unknownSettingVariables } from '../../src/config/config.js';
import { SETTINGS, type SettingKey } from '../../src/config/settings.js';
import { StartupError } from '../../src/errors.js';
import ms from 'ms';

test('defaults are those of DESIGN.md §10', () => {
  const c = loadConfig({});
  assert.equal(c.host, '127.0.0.1');
  assert.equal(c.port, 8080);
  assert.equal(c.partitions, 8);
  assert.equal(c.messageTtlMs, 7 * 86_400_000);
  assert.equal(c.inboxCap, 10_000);
  assert.equal(c.maxMessageBytes, 65_536);
  assert.equal(c.maxClientFrameBytes, 4096);
  assert.equal(c.maxConnectionsPerUser, 5);
  assert.equal(c.deliveryWindow, 100);
  assert.equal(c.ackTimeoutMs, 10_000);
  assert.deepEqual(c.redeliveryBackoffMs, [2000, 4000, 6000]);
  assert.equal(c.heartbeatMs, 25_000);
  assert.equal(c.idleTimeoutMs, 60_000);
  assert.equal(c.socketHighWaterBytes, 1024 * 1024);
  assert.equal(c.socketHardCapBytes, 8 * 1024 * 1024);
  assert.equal(c.broadcastStreamCap, 10_000);
  assert.equal(c.roomSizeCap, 10_000);
  assert.equal(c.redisUrl, undefined);
  assert.equal(c.dataDir, path.resolve('storage'));
});

test('the configuration is frozen', () => {
  const c = loadConfig({});
  assert.ok(Object.isFrozen(c));
  assert.ok(Object.isFrozen(c.redeliveryBackoffMs));
  assert.ok(Object.isFrozen(loadConfig({ PIXIU_ALLOWED_ORIGINS: 'https://a.example' }).allowedOrigins));
  assert.ok(Object.isFrozen(c.allowedOrigins));
  assert.throws(() => { (c as { port: number }).port = 1; }, TypeError);
});

test('environment values are parsed: integers, durations, lists', () => {
  const c = loadConfig({
    PIXIU_PORT: '9000', PIXIU_MESSAGE_TTL: '2h', PIXIU_ACK_TIMEOUT: '1500',
    PIXIU_REDELIVERY_BACKOFF: '1s, 2s', PIXIU_ALLOWED_ORIGINS: 'https://a.example, https://b.example',
    PIXIU_PARTITIONS: '16', PIXIU_STORE_DURABILITY: 'relaxed', PIXIU_REDIS_URL: 'redis://127.0.0.1:7000',
  });
  assert.equal(c.port, 9000);
  assert.equal(c.messageTtlMs, 7_200_000);
  assert.equal(c.ackTimeoutMs, 1500);
  assert.deepEqual(c.redeliveryBackoffMs, [1000, 2000]);
  assert.deepEqual(c.allowedOrigins, ['https://a.example', 'https://b.example']);
  assert.equal(c.partitions, 16);
  assert.equal(c.storeDurability, 'relaxed');
  assert.equal(c.redisUrl, 'redis://127.0.0.1:7000');
});

test('flags override the environment, and an empty variable counts as unset', () => {
  const c = loadConfig({ PIXIU_PORT: '9000', PIXIU_HOST: '' }, { port: '9100' });
  assert.equal(c.port, 9100);
  assert.equal(c.host, '127.0.0.1');
});

test('a bad value is a startup error naming the variable and what it accepts', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PIXIU_PORT: 'eighty' }, /PIXIU_PORT="eighty" is not valid; expected: HTTP and WebSocket port, 0 to 65535 \(0: any free port\)$/m],
    [{ PIXIU_PORT: '70000' }, /PIXIU_PORT/],
    [{ PIXIU_PARTITIONS: '3' }, /PIXIU_PARTITIONS="3".*power of two/],
    [{ PIXIU_PARTITIONS: '512' }, /PIXIU_PARTITIONS/],
    [{ PIXIU_MESSAGE_TTL: 'forever' }, /PIXIU_MESSAGE_TTL="forever".*1s to 30d/],
    [{ PIXIU_MESSAGE_TTL: '90d' }, /PIXIU_MESSAGE_TTL/],
    [{ PIXIU_STORE_DURABILITY: 'maybe' }, /PIXIU_STORE_DURABILITY.*one of: fsync, relaxed/],
    [{ PIXIU_REDIS_URL: 'localhost:6379' }, /PIXIU_REDIS_URL/],
    [{ PIXIU_API_TOKEN: 'short' }, /PIXIU_API_TOKEN/],
    [{ PIXIU_REDELIVERY_BACKOFF: '1s,,x' }, /PIXIU_REDELIVERY_BACKOFF/],
    [{ PIXIU_JWT_SECRET: 'x'.repeat(40), PIXIU_JWKS_URL: 'https://idp.example/jwks' }, /only one of/],
    [{ PIXIU_SOCKET_HIGH_WATER_BYTES: '4096', PIXIU_SOCKET_HARD_CAP_BYTES: '2048' }, /HARD_CAP/],
    [{ PIXIU_IDLE_TIMEOUT: '3s', PIXIU_HEARTBEAT: '60s' }, /PIXIU_IDLE_TIMEOUT \(3000 ms\) must be longer than PIXIU_HEARTBEAT \(60000 ms\)/],
    [{ PIXIU_IDLE_TIMEOUT: '25s' }, /PIXIU_IDLE_TIMEOUT \(25000 ms\) must be longer than the default PIXIU_HEARTBEAT \(25000 ms\)/],
    [{ PIXIU_HEARTBEAT: '120s' }, /PIXIU_IDLE_TIMEOUT \(60000 ms\) must be longer than PIXIU_HEARTBEAT/],
  ];
  for (const [env, pattern] of cases) {
    assert.throws(() => loadConfig(env), (err: unknown) => err instanceof StartupError && pattern.test(err.message), JSON.stringify(env));
  }
});

test('a bad secret is never shown: the message names the setting and what is wrong with the value', () => {
  const privateKey = '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHiddenKeyMaterial\n-----END PRIVATE KEY-----';
  const cases: Array<[Record<string, string>, Partial<Record<'jwtSecret', string>>, string, RegExp]> = [
    [{ PIXIU_JWT_SECRET: 'supersecretvalue-too-short' }, {}, 'supersecretvalue-too-short', /PIXIU_JWT_SECRET is not valid: it is 26 characters long, under the minimum of 32 \(the value is not shown\); expected: HS256 secret/],
    [{}, { jwtSecret: 'sh0rt-s3cret' }, 'sh0rt-s3cret', /--jwt-secret is not valid: it is 12 characters long, under the minimum of 32/],
    [{ PIXIU_API_TOKEN: 'near-miss-token' }, {}, 'near-miss-token', /PIXIU_API_TOKEN is not valid: it is 15 characters long, under the minimum of 16/],
    [{ PIXIU_API_TOKEN: 'k'.repeat(513) }, {}, 'k'.repeat(20), /PIXIU_API_TOKEN is not valid: it is 513 characters long, over the maximum of 512/],
    // Characters, as the bound counts them: code points, not UTF-16 units or bytes.
    [{ PIXIU_API_TOKEN: '🔑'.repeat(15) }, {}, '🔑', /PIXIU_API_TOKEN is not valid: it is 15 characters long/],
    // Not secret itself, but a private key pasted by mistake must not be printed either.
    [{ PIXIU_JWT_PUBLIC_KEY: privateKey }, {}, 'HiddenKeyMaterial', /PIXIU_JWT_PUBLIC_KEY is not valid: it does not have the required form \(the value is not shown\)/],
    // A Redis URL may carry a password.
    [{ PIXIU_REDIS_URL: 'http://:hunter2-password@redis.example:6379' }, {}, 'hunter2', /PIXIU_REDIS_URL is not valid: it does not have the required form.*redis:\/\//],
    // So may a JWKS URL.
    [{ PIXIU_JWKS_URL: 'ftp://user:s3cretpw@idp.example/jwks' }, {}, 's3cretpw', /PIXIU_JWKS_URL is not valid: it does not have the required form/],
    // Past the pattern, one the URL parser cannot read: it was Node's bare "Invalid URL" (walk38 F5).
    [{ PIXIU_JWKS_URL: 'https://?key=s3cretpw' }, {}, 's3cretpw', /PIXIU_JWKS_URL is not valid: it is not a URL that can be read \(a host after https:\/\/, say\)/],
    [{ PIXIU_JWKS_URL: 'https://user:s3cretpw@idp example/jwks' }, {}, 's3cretpw', /PIXIU_JWKS_URL is not valid: it is not a URL that can be read/],
  ];
  for (const [env, flags, secret, expected] of cases) {
    assert.throws(() => loadConfig(env, flags), (err: unknown) => {
      assert.ok(err instanceof StartupError);
      assert.match(err.message, expected);
      assert.ok(!err.message.includes(secret), `the value is shown: ${err.message}`);
      return true;
    });
  }
});

test('every bad value is reported at once, with the flag name when it came from a flag', () => {
  assert.throws(
    () => loadConfig({ PIXIU_PORT: 'x' }, { partitions: '5' }),
    (err: unknown) => err instanceof StartupError && /PIXIU_PORT/.test(err.message) && /--partitions="5"/.test(err.message),
  );
});

test('every setting has a PIXIU_ variable, a flag and a doc', () => {
  const envs = new Set<string>();
  for (const spec of Object.values(SETTINGS)) {
    assert.match(spec.env, /^PIXIU_[A-Z_]+$/);
    assert.match(spec.flag, /^[a-z][a-z-]+$/);
    assert.ok(spec.doc.length > 10);
    assert.ok(!envs.has(spec.env));
    envs.add(spec.env);
  }
});

test('unknownSettingVariables names PIXIU_ variables that are no setting (typos), and nothing else', () => {
  assert.deepEqual(unknownSettingVariables({ PIXIU_PROT: '9000', PIXIU_PORT: '9000', PATH: '/bin', PIXIU_REDIS_URL: 'redis://x' }), ['PIXIU_PROT']);
  assert.deepEqual(unknownSettingVariables({}), []);
  // Sorted, whatever order the environment lists them in.
  assert.deepEqual(unknownSettingVariables({ PIXIU_ZED: '1', PIXIU_ALPHA: '1', PIXIU_MID: '1' }), ['PIXIU_ALPHA', 'PIXIU_MID', 'PIXIU_ZED']);
});

test('bareDurationSettings names the durations given as a bare number, flag before variable, and no other', () => {
  assert.deepEqual(bareDurationSettings({ PIXIU_MESSAGE_TTL: '86400', PIXIU_HEARTBEAT: '25s', PIXIU_PORT: '8080', PIXIU_IDLE_TIMEOUT: '' }),
    ['PIXIU_MESSAGE_TTL=86400 is 86.4 s']);
  // A flag wins over its variable, as in loadConfig; a list warns when any part is bare.
  assert.deepEqual(bareDurationSettings({ PIXIU_MESSAGE_TTL: '86400' }, { messageTtlMs: '1d', heartbeatMs: '30000' }), ['--heartbeat=30000 is 30 s']);
  assert.deepEqual(bareDurationSettings({ PIXIU_REDELIVERY_BACKOFF: '10s,2000,4s' }), ['PIXIU_REDELIVERY_BACKOFF=10s,2000,4s is 10 s, 2 s, 4 s']);
  assert.deepEqual(bareDurationSettings({ PIXIU_MESSAGE_TTL: '1d', PIXIU_SWEEP_INTERVAL: '0' }), []);
  // Whatever is read as milliseconds for want of a unit: a leading zero, a decimal point.
  assert.deepEqual(bareDurationSettings({ PIXIU_MESSAGE_TTL: '086400', PIXIU_HEARTBEAT: '2500.0' }),
    ['PIXIU_MESSAGE_TTL=086400 is 86.4 s', 'PIXIU_HEARTBEAT=2500.0 is 2.5 s']);
});

test('an idle timeout longer than the heartbeat is accepted, however close', () => {
  const c = loadConfig({ PIXIU_HEARTBEAT: '2000', PIXIU_IDLE_TIMEOUT: '2001' });
  assert.equal(c.heartbeatMs, 2000);
  assert.equal(c.idleTimeoutMs, 2001);
});

test('an integer setting takes decimal digits only: 1e3, 0x50, 0b1, 0o17 and 8080.0 are refused, not read as numbers', () => {
  for (const text of ['1e3', '0x50', '0b1', '0o17', '8080.0', '+80']) {
    assert.throws(() => loadConfig({ PIXIU_PORT: text }), (err: unknown) => err instanceof StartupError && /PIXIU_PORT=/.test(err.message), text);
    assert.throws(() => loadConfig({ PIXIU_MAX_CONNECTIONS_PER_USER: text }), StartupError, text);
  }
  assert.equal(loadConfig({ PIXIU_PORT: ' 8081 ' }).port, 8081);
});

test('the bounds a setting\'s doc states ("1 to 1000", "1s to 30d") are the ones it is held to', () => {
  let checked = 0;
  for (const spec of Object.values(SETTINGS)) {
    if (spec.kind !== 'int' && spec.kind !== 'duration') continue;
    const m = /(\d\S*) to (\d\S*?)[;,)]?(?:\s|$)/.exec(spec.doc);
    if (m === null) continue;
    const read = (t: string): number | undefined => spec.kind === 'int'
      ? (/^\d+$/.test(t) ? Number(t) : undefined)
      : (/^\d+$/.test(t) ? Number(t) : (ms(t as ms.StringValue) as number | undefined));
    const lo = read(m[1] ?? '');
    const hi = read(m[2] ?? '');
    if (lo === undefined || hi === undefined) continue;
    checked++;
    const at = (v: number): Record<string, string> => ({ [spec.env]: String(v) });
    for (const v of [lo, hi]) assert.doesNotThrow(() => loadConfig(at(v)), `${spec.env}=${v} (doc: ${spec.doc})`);
    for (const v of [lo - 1, hi + 1]) {
      assert.throws(() => loadConfig(at(v)), (err: unknown) => err instanceof StartupError && err.message.includes(spec.env), `${spec.env}=${v} (doc: ${spec.doc})`);
    }
  }
  // PIXIU_PORT, PIXIU_REDIS_COMMAND_TIMEOUT, PIXIU_PARTITIONS, PIXIU_MESSAGE_TTL,
  // PIXIU_REQUEST_TIMEOUT, PIXIU_MAX_BODY_BYTES, PIXIU_MAX_CONNECTIONS_PER_USER,
  // PIXIU_CHANNEL_HISTORY_TTL at least.
  assert.ok(checked >= 8, `bounds read from ${checked} docs`);
});

test('a hard cap equal to the high-water mark is accepted ("at least"), one byte under it is not', () => {
  const c = loadConfig({ PIXIU_SOCKET_HIGH_WATER_BYTES: '4096', PIXIU_SOCKET_HARD_CAP_BYTES: '4096' });
  assert.equal(c.socketHardCapBytes, 4096);
  assert.throws(() => loadConfig({ PIXIU_SOCKET_HIGH_WATER_BYTES: '4096', PIXIU_SOCKET_HARD_CAP_BYTES: '4095' }),
    (err: unknown) => err instanceof StartupError && /PIXIU_SOCKET_HARD_CAP_BYTES \(4095 bytes\) must be at least PIXIU_SOCKET_HIGH_WATER_BYTES \(4096 bytes\)/.test(err.message));
});

test('a check across two settings names each as it was given: the flag, the variable, or the variable of a default', () => {
  assert.throws(() => loadConfig({}, { idleTimeoutMs: '10s' }),
    (err: unknown) => err instanceof StartupError && /--idle-timeout \(10000 ms\) must be longer than the default PIXIU_HEARTBEAT \(25000 ms\)/.test(err.message));
  assert.throws(() => loadConfig({ PIXIU_SOCKET_HIGH_WATER_BYTES: '8192' }, { socketHardCapBytes: '4096' }),
    (err: unknown) => err instanceof StartupError && /--socket-hard-cap-bytes \(4096 bytes\) must be at least PIXIU_SOCKET_HIGH_WATER_BYTES \(8192 bytes\)/.test(err.message));
});

test('PIXIU_PEER_READ_TIMEOUT unset is the Redis command timeout, default or given (what bounded peer reads before it); set, it is its own', () => {
  assert.equal(loadConfig({}).peerReadTimeoutMs, 2000);
  assert.equal(loadConfig({ PIXIU_REDIS_COMMAND_TIMEOUT: '5s' }).peerReadTimeoutMs, 5000);
  assert.equal(loadConfig({ PIXIU_REDIS_COMMAND_TIMEOUT: '5s', PIXIU_PEER_READ_TIMEOUT: '' }).peerReadTimeoutMs, 5000, 'empty is unset');
  const both = loadConfig({ PIXIU_REDIS_COMMAND_TIMEOUT: '5s', PIXIU_PEER_READ_TIMEOUT: '300ms' });
  assert.deepEqual([both.redisCommandTimeoutMs, both.peerReadTimeoutMs], [5000, 300]);
  assert.equal(loadConfig({}, { peerReadTimeoutMs: '60s' }).peerReadTimeoutMs, 60_000);
  assert.throws(() => loadConfig({}, { peerReadTimeoutMs: '61s' }),
    (err: unknown) => err instanceof StartupError && /--peer-read-timeout="61s" is out of range; expected: how long one read of stored messages from another node may take/.test(err.message));
});

test('PIXIU_NOTIFY is on by default and off when set so', () => {
  assert.equal(loadConfig({}).notify, true);
  assert.equal(loadConfig({ PIXIU_NOTIFY: 'on' }).notify, true);
  assert.equal(loadConfig({ PIXIU_NOTIFY: 'off' }).notify, false);
  assert.equal(loadConfig({}, { notify: 'off' }).notify, false);
});

test('a command that reads a setting in another sense words what it expects its own way', () => {
  assert.throws(() => loadConfig({}, { host: '' }, { host: 'the host of the service to connect to' }),
    (err: unknown) => err instanceof StartupError && /--host="" is not valid; expected: the host of the service to connect to$/m.test(err.message)
      && !err.message.includes(SETTINGS.host.doc));
});

test('the defaults the docs state beyond DESIGN.md §10 are the settings\' defaults', () => {
  const c = loadConfig({});
  // DESIGN.md §3, §7 (a 2xx means fsynced) and the key names (px:broadcast).
  assert.equal(c.storeDurability, 'fsync');
  assert.equal(c.redisPrefix, 'px:');
  assert.deepEqual(c.allowedOrigins, []);
  // docs/api.md.
  assert.equal(c.requestTimeoutMs, 60_000);
  assert.equal(c.maxBodyBytes, 1024 * 1024);
  assert.equal(c.historyTakeTimeoutMs, 60_000);
  assert.equal(c.redisCommandTimeoutMs, 2000);
  assert.equal(c.batchMaxRecipients, 100_000);
  assert.equal(c.channelHistory, 100);
  assert.equal(c.channelHistoryTtlMs, 86_400_000);
  // docs/protocol.md and docs/decisions.md.
  assert.equal(c.maxDeviceCursors, 100);
  assert.equal(c.pausedTimeoutMs, 30_000);
  assert.equal(c.ackFlushIntervalMs, 100);
  assert.equal(c.claimsSettleMs, 6000);
  assert.equal(c.storeCacheBytes, 64 * 1024 * 1024);
  assert.equal(c.advertiseUrl, undefined);
  assert.equal(c.apiToken, undefined);
  assert.equal(c.jwtSecret, undefined);
});

test('PIXIU_REDIS_PREFIX is 1 to 32 characters without braces (they would make a Redis Cluster hash tag of it) or whitespace', () => {
  assert.equal(loadConfig({ PIXIU_REDIS_PREFIX: 'p'.repeat(32) }).redisPrefix, 'p'.repeat(32));
  assert.equal(loadConfig({ PIXIU_REDIS_PREFIX: 'app:px:' }).redisPrefix, 'app:px:');
  for (const bad of ['p'.repeat(33), 'a{b', 'a}b', '{x}:', 'a b', 'a\tb']) {
    assert.throws(() => loadConfig({ PIXIU_REDIS_PREFIX: bad }), (err: unknown) => err instanceof StartupError
      && err.message.includes(`PIXIU_REDIS_PREFIX=${JSON.stringify(bad)} is not valid`), JSON.stringify(bad));
  }
});

test('PIXIU_JWKS_URL and PIXIU_ADVERTISE_URL take http:// or https:// URLs only; an advertised base URL has no query or fragment', () => {
  assert.equal(loadConfig({ PIXIU_JWKS_URL: 'https://idp.example/.well-known/jwks.json' }).jwksUrl, 'https://idp.example/.well-known/jwks.json');
  for (const bad of ['https:idp.example/jwks', 'http:/idp.example/jwks', 'idp.example/jwks']) {
    assert.throws(() => loadConfig({ PIXIU_JWKS_URL: bad }), (err: unknown) => err instanceof StartupError
      && /PIXIU_JWKS_URL is not valid: it does not have the required form/.test(err.message), bad);
  }
  assert.equal(loadConfig({ PIXIU_ADVERTISE_URL: 'http://10.0.0.7:8080/pixiu' }).advertiseUrl, 'http://10.0.0.7:8080/pixiu');
  for (const bad of ['http://10.0.0.7:8080/pixiu?x=1', 'http://10.0.0.7:8080/#top', 'http:10.0.0.7', 'http://a b/', 'ws://10.0.0.7:8080']) {
    assert.throws(() => loadConfig({ PIXIU_ADVERTISE_URL: bad }), (err: unknown) => err instanceof StartupError
      && err.message.includes(`PIXIU_ADVERTISE_URL=${JSON.stringify(bad)} is not valid`), bad);
  }
});

test('a setting at which the service could not work (no message in flight, an inbox of none, no heartbeat) is refused below its lower bound', () => {
  // [variable, the lowest value taken, its bound as the error says it]
  const lowest: Array<[string, string, string]> = [
    ['PIXIU_DELIVERY_WINDOW', '1', 'from 1 to 10000'],
    ['PIXIU_INBOX_CAP', '1', 'from 1 to 10000000'],
    ['PIXIU_ROOM_SIZE_CAP', '1', 'from 1 to 1000000'],
    ['PIXIU_BROADCAST_STREAM_CAP', '1', 'from 1 to 10000000'],
    ['PIXIU_CHANNEL_HISTORY', '1', 'from 1 to 100000'],
    ['PIXIU_MAX_DEVICE_CURSORS', '1', 'from 1 to 100000'],
    ['PIXIU_BATCH_MAX_RECIPIENTS', '1', 'from 1 to 1000000'],
    ['PIXIU_MAX_CLIENT_FRAME_BYTES', '256', 'from 256 to 1048576'],
    ['PIXIU_MAX_MESSAGE_BYTES', '1024', 'from 1024 to 16777216'],
    ['PIXIU_SOCKET_HIGH_WATER_BYTES', '1024', 'from 1024 to 1073741824'],
    ['PIXIU_HEARTBEAT', '10', 'from 10ms to 10m'],
    ['PIXIU_ACK_TIMEOUT', '10', 'from 10ms to 10m'],
    ['PIXIU_REDELIVERY_BACKOFF', '10', 'from 10ms to 10m'],
    ['PIXIU_PAUSED_TIMEOUT', '10', 'from 10ms to 1h'],
    ['PIXIU_SWEEP_INTERVAL', '10', 'from 10ms to 1d'],
    ['PIXIU_BROADCAST_RATE', '100', 'from 100 to 10000000'],
  ];
  for (const [env, min, bound] of lowest) {
    assert.doesNotThrow(() => loadConfig({ [env]: min, PIXIU_IDLE_TIMEOUT: '1h' }), env);
    const below = String(Number(min) - 1);
    assert.throws(() => loadConfig({ [env]: below }), (err: unknown) => err instanceof StartupError
      && err.message.includes(`${env}=${JSON.stringify(below)} ${/^from \d+ms /.test(bound) ? 'is out of range' : 'is not valid'}`)
      && err.message.includes(bound), `${env}=${below}`);
  }
});

test('--jwt-audience and --jwt-issuer given empty are refused, not read as requiring an empty aud or iss', () => {
  for (const key of ['jwtAudience', 'jwtIssuer'] as const) {
    assert.throws(() => loadConfig({}, { [key]: '' }), (err: unknown) => err instanceof StartupError
      && err.message.includes(`--${SETTINGS[key].flag}="" is not valid`), key);
  }
});

test('PIXIU_JWT_AUDIENCE and PIXIU_JWT_ISSUER with whitespace at either end are refused naming the setting (every token would be 401 otherwise)', () => {
  for (const env of ['PIXIU_JWT_AUDIENCE', 'PIXIU_JWT_ISSUER']) {
    for (const bad of ['pixiu-app ', ' pixiu-app', 'pixiu-app\n', ' ', '\t']) {
      assert.throws(() => loadConfig({ [env]: bad }), (err: unknown) => err instanceof StartupError
        && err.message.includes(`${env}=${JSON.stringify(bad)} is not valid`) && err.message.includes('whitespace'), `${env}=${JSON.stringify(bad)}`);
    }
  }
  // Inner spaces are a value a token can carry, and are taken as they are.
  const config = loadConfig({ PIXIU_JWT_AUDIENCE: 'my app', PIXIU_JWT_ISSUER: 'https://idp.example/realms/x' });
  assert.deepEqual([config.jwtAudience, config.jwtIssuer], ['my app', 'https://idp.example/realms/x']);
});

test('the settings whose docs say 0 turns them off take 0', () => {
  assert.equal(loadConfig({ PIXIU_STORE_CACHE_BYTES: '0' }).storeCacheBytes, 0);
  assert.equal(loadConfig({ PIXIU_CLAIMS_SETTLE: '0' }).claimsSettleMs, 0);
  assert.equal(loadConfig({ PIXIU_PORT: '0' }).port, 0);
  assert.equal(loadConfig({ PIXIU_SOCKET_BUFFER_BUDGET_BYTES: '0' }).socketBufferBudgetBytes, 0);
  assert.equal(loadConfig({}).socketBufferBudgetBytes, undefined, 'unset: derived at start (src/gateway/buffer-budget.ts)');
});

test('an enum setting takes only its choices: PIXIU_NOTIFY=no or =true is refused, not read as off', () => {
  for (const bad of ['no', 'true', 'false', 'o n', '1']) {
    assert.throws(() => loadConfig({ PIXIU_NOTIFY: bad }), (err: unknown) => err instanceof StartupError
      && err.message.includes(`PIXIU_NOTIFY=${JSON.stringify(bad)} is not valid`) && /\(one of: on, off\)/.test(err.message), bad);
  }
});

test('a PIXIU_REDIS_URL of the right scheme that cannot be used is refused at start, in words that do not quote it', () => {
  const cases: Array<[string, RegExp]> = [
    ['redis://:hunter2-pw@cache.example:port/0', /it is not a URL that can be read/],
    ['redis://:hunter2-pw@cache.example:6379/zero', /the path must be a database number, like \/0/],
    ['redis://:hunter2-pw@/0', /it names no host|it is not a URL that can be read/],
  ];
  for (const [url, problem] of cases) {
    assert.throws(() => loadConfig({ PIXIU_REDIS_URL: url }), (err: unknown) => err instanceof StartupError
      && /PIXIU_REDIS_URL is not valid: /.test(err.message) && problem.test(err.message) && !err.message.includes('hunter2'), url);
  }
});

test('--data-dir given empty is refused, not read as the working directory', () => {
  assert.throws(() => loadConfig({}, { dataDir: '' }), (err: unknown) => err instanceof StartupError && err.message.includes('--data-dir="" is not valid'));
});

test('an enum setting takes its choices in any case, with spaces at either end: PIXIU_LOG_LEVEL=WARN, --log-level Info', () => {
  assert.equal(loadConfig({ PIXIU_LOG_LEVEL: 'WARN' }).logLevel, 'warn');
  assert.equal(loadConfig({}, { logLevel: 'Info ' }).logLevel, 'info');
  assert.equal(loadConfig({ PIXIU_NOTIFY: 'OFF' }).notify, false);
  assert.equal(loadConfig({ PIXIU_NOTIFY: 'On' }).notify, true);
  assert.equal(loadConfig({ PIXIU_STORE_DURABILITY: 'Relaxed' }).storeDurability, 'relaxed');
  // A refusal quotes the value as it was given.
  assert.throws(() => loadConfig({ PIXIU_LOG_LEVEL: 'VERBOSE' }), (err: unknown) => err instanceof StartupError
    && err.message.includes('PIXIU_LOG_LEVEL="VERBOSE" is not valid') && /\(one of: fatal, error, warn/.test(err.message));
});

test('PIXIU_DRAIN_DELAY: 0 by default, a duration up to 10 minutes', () => {
  assert.equal(loadConfig({}).drainDelayMs, 0);
  assert.equal(loadConfig({ PIXIU_DRAIN_DELAY: '15s' }).drainDelayMs, 15_000);
  assert.equal(loadConfig({}, { drainDelayMs: '10m' }).drainDelayMs, 600_000);
  assert.throws(() => loadConfig({ PIXIU_DRAIN_DELAY: '11m' }), /PIXIU_DRAIN_DELAY="11m" is out of range; expected:/);
  assert.throws(() => loadConfig({ PIXIU_DRAIN_DELAY: 'soon' }), /PIXIU_DRAIN_DELAY="soon" is not a duration: give a number and one unit/);
});

test('a duration refused says whether it is none (and what one is: compounds are not) or out of range, not one generic "not valid"', () => {
  const refusal = (env: Record<string, string>): string => {
    try {
      loadConfig(env);
    } catch (err) {
      if (err instanceof StartupError) return err.message;
      throw err;
    }
    assert.fail('not refused');
  };
  const forms = 'give a number and one unit, ms, s, m, h or d (e.g. 500ms, 30s, 1h, 7d; a bare number is milliseconds); compound durations like 5m5s are not taken';
  assert.match(refusal({ PIXIU_HEARTBEAT: '5m5s' }),
    new RegExp(`PIXIU_HEARTBEAT="5m5s" is not a duration: ${forms.replace(/[().;]/g, '\\$&')}; expected: server ping interval`));
  assert.match(refusal({ PIXIU_MESSAGE_TTL: '99999d' }), /PIXIU_MESSAGE_TTL="99999d" is out of range; expected: default message retention, 1s to 30d$/m);
  assert.match(refusal({ PIXIU_MESSAGE_TTL: '-1s' }), /PIXIU_MESSAGE_TTL="-1s" is out of range; expected/);
  assert.match(refusal({ PIXIU_REDELIVERY_BACKOFF: '2s,,4s' }), /PIXIU_REDELIVERY_BACKOFF="2s,,4s" is not a list of durations: "" is no duration; give a number and one unit/);
  assert.match(refusal({ PIXIU_REDELIVERY_BACKOFF: '2s, 1h' }), /PIXIU_REDELIVERY_BACKOFF="2s, 1h" is out of range; expected/);
  // What the `ms` package reads beyond the forms --help shows is still taken (README "Commands").
  for (const [text, msValue] of [['1 s', 1000], ['1S', 1000], ['1.5s', 1500], ['1w', 604_800_000], ['2 hours', 7_200_000], ['5 m', 300_000], ['1H', 3_600_000], ['3 Min', 180_000]] as const) {
    assert.equal(loadConfig({ PIXIU_MESSAGE_TTL: text }).messageTtlMs, msValue, text);
  }
  assert.equal(loadConfig({ PIXIU_HEARTBEAT: '20MS' }).heartbeatMs, 20, 'an uppercase MS is milliseconds, as any case of any other unit');
  // But not an uppercase M alone, minutes to `ms` and a month to ISO 8601 (P1M) and many
  // people: PIXIU_MESSAGE_TTL=1M meant for a month kept messages a minute (walk31 F6).
  const m = 'an uppercase M is refused: minutes or months would be a guess (ISO 8601\'s P1M is a month); write m for minutes (5m) and days for a month (30d)';
  for (const text of ['1M', '5 M', ' 1.5M ']) {
    assert.ok(refusal({ PIXIU_MESSAGE_TTL: text }).endsWith(`\n  PIXIU_MESSAGE_TTL=${JSON.stringify(text)} is not a duration: ${m}; expected: default message retention, 1s to 30d`), text);
  }
  assert.match(refusal({ PIXIU_REDELIVERY_BACKOFF: '2s,1M' }), new RegExp(`PIXIU_REDELIVERY_BACKOFF="2s,1M" is not a list of durations: "1M" is no duration; ${m.replace(/[().;]/g, '\\$&')}`));
  // Other kinds keep the plain words.
  assert.match(refusal({ PIXIU_PORT: '70000' }), /PIXIU_PORT="70000" is not valid; expected/);
});
