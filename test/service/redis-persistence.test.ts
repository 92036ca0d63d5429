/**
 * The start-up look at how the given Redis persists (src/redis/persistence-check.ts,
 * DESIGN.md §4): a Redis without AOF is named in a warning — a restart of it loses
 * inboxes, acknowledged messages included, or with snapshots only what was appended
 * since the last one — and one with AOF is not. Real
 * redis-servers, their settings changed with CONFIG SET.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ReplyError, type Redis } from 'ioredis';
import { createRedis } from '../../src/redis/client.js';
import { redisUptimeMs } from '../../src/redis/persistence-check.js';
import { checkSettings, settingsChecked } from '../../src/redis/settings-check.js';
import { CommandSwapProxy } from '../harness/command-swap-proxy.js';
import { waitUntil } from '../harness/checks.js';
import type { Logger } from '../../src/logger.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcess, type CleanupContext } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { startRefusal } from '../harness/start-refusal.js';

let server: RedisServer;
let admin: Redis;
const files = cleanupList();

before(async () => {
  server = await RedisServer.start({ aof: false });
  files.after(() => server.destroy());
  admin = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  files.after(() => admin.quit());
});

after(() => files.run());

/**
 * Starts a node on `redisUrl` under `prefix` ({@link startInProcess}: no claims wait),
 * logging to `logger`, and closes it: what its start said is in `logger`'s lines.
 */
async function startAndClose(t: CleanupContext, redisUrl: string, prefix: string, logger: Logger): Promise<void> {
  const { service } = await startInProcess(t, { redisUrl, redisPrefix: prefix, storeDurability: 'relaxed' }, logger);
  await service.close();
}

test('the start-up check tells AOF, snapshots only and nothing apart', async () => {
  /** How the start-up check reads the Redis's persistence. */
  const persistence = async (): Promise<string | undefined> => (await checkSettings(admin, server.url, capturingLogger().logger)).persistence;
  await admin.config('SET', 'appendonly', 'no');
  await admin.config('SET', 'save', '');
  assert.equal(await persistence(), 'none');
  await admin.config('SET', 'save', '3600 1');
  assert.equal(await persistence(), 'snapshots');
  await admin.config('SET', 'appendonly', 'yes');
  assert.equal(await persistence(), 'aof');
});

test('a service started on a Redis that persists by snapshots only warns once, naming what a restart loses', async (t) => {
  await admin.config('SET', 'appendonly', 'no');
  await admin.config('SET', 'save', '3600 1');
  const { logger, lines } = capturingLogger();
  await startAndClose(t, server.url, 'persist-snapshots:', logger);
  const warnings = lines.filter((l) => l.level === 40 && /Redis persists by snapshots only/.test(l.msg ?? ''));
  assert.equal(warnings.length, 1, JSON.stringify(lines.filter((l) => l.level === 40)));
  assert.match(warnings[0]?.msg ?? '', /a Redis restart loses the inbox appends since the last snapshot, messages already acknowledged; run it with appendonly yes/);
});

test('a service started on a Redis without AOF warns once, naming the risk; on one with AOF it does not', async (t) => {
  for (const [appendonly, warned] of [['no', true], ['yes', false]] as const) {
    await admin.config('SET', 'appendonly', appendonly);
    await admin.config('SET', 'save', '');
    const { logger, lines } = capturingLogger();
    await startAndClose(t, server.url, `persist-${appendonly}:`, logger);
    const warnings = lines.filter((l) => l.level === 40 && /Redis does not persist/.test(l.msg ?? ''));
    assert.equal(warnings.length, warned ? 1 : 0, `appendonly ${appendonly}: ${JSON.stringify(warnings)}`);
    if (warned) assert.match(warnings[0]?.msg ?? '', /a Redis restart loses every inbox, and messages already acknowledged never reach recipients who were offline; run it with appendonly yes/);
  }
});

test('a service started on a Redis that may evict keys warns once, naming the policy and what eviction loses; with noeviction it does not', async (t) => {
  await admin.config('SET', 'appendonly', 'yes');
  for (const [policy, warned] of [['allkeys-lru', true], ['volatile-ttl', true], ['noeviction', false]] as const) {
    await admin.config('SET', 'maxmemory-policy', policy);
    const { logger, lines } = capturingLogger();
    await startAndClose(t, server.url, `evict-${policy}:`, logger);
    const warnings = lines.filter((l) => l.level === 40 && /Redis may evict keys/.test(l.msg ?? ''));
    assert.equal(warnings.length, warned ? 1 : 0, `${policy}: ${JSON.stringify(warnings)}`);
    if (warned) assert.match(warnings[0]?.msg ?? '', new RegExp(`maxmemory-policy ${policy}\\): .*messages already acknowledged are lost; run it with maxmemory-policy noeviction`));
  }
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
});

test('a URL naming a database the Redis does not have stops the start, naming it; a database it has is the one used', async (t) => {
  const { logger, lines } = capturingLogger();
  const client = await createRedis({ url: `${server.url}/99`, commandTimeoutMs: 5000, logger }).then((c) => c, (err: unknown) => err as Error);
  if (!(client instanceof Error)) client.disconnect(); // connected to database 0: fail, not hang
  assert.ok(client instanceof Error && /cannot use database 99 of Redis at .*: ERR DB index is out of range/.test(client.message), String(client));
  // The refusal is no lost connection: nothing says one was restored.
  assert.deepEqual(lines.filter((l) => /connection (error|restored)/.test(l.msg ?? '')).map((l) => l.msg), []);
  // A start on database 0 is closed at once (startRefusal): fail, not hang.
  const started = await startRefusal(t, { redisUrl: `${server.url}/99`, redisPrefix: 'db-99:', storeDurability: 'relaxed' }, capturingLogger().logger);
  assert.ok(started instanceof Error && started.name === 'StartupError' && /cannot use database 99/.test(started.message), String(started));
  assert.deepEqual(await admin.keys('db-99:*'), [], 'nothing written to database 0');
  const third = await createRedis({ url: `${server.url}/3`, commandTimeoutMs: 5000 });
  t.after(() => third.quit());
  assert.match(String(await third.call('CLIENT', 'INFO')), /\bdb=3\b/);
});

test('the eviction warning says when eviction starts: at the maxmemory set, or once one is set when none is', async () => {
  await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
  try {
    for (const [maxmemory, when] of [['0', 'once a maxmemory is set (none is now)'], ['104857600', 'when it reaches maxmemory (104857600 bytes)']] as const) {
      await admin.config('SET', 'maxmemory', maxmemory);
      const { logger, lines } = capturingLogger();
      const read = await checkSettings(admin, server.url, logger);
      assert.deepEqual([read.policy, read.maxmemory], ['allkeys-lru', Number(maxmemory)]);
      const warning = lines.find((l) => l.level === 40 && /Redis may evict keys/.test(l.msg ?? ''));
      assert.ok(warning?.msg?.includes(`(maxmemory-policy allkeys-lru): ${when} it drops inbox entries`), warning?.msg);
    }
  } finally {
    await admin.config('SET', 'maxmemory', '0');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
  }
});

test('redisUptimeMs answers the server\'s uptime in ms', async () => {
  const seconds = async (): Promise<number> => Number(/^uptime_in_seconds:(\d+)/m.exec(await admin.info('server'))?.[1]);
  await waitUntil('the server has run a second', async () => (await seconds()) >= 1);
  const before = await seconds();
  const ms = await redisUptimeMs(admin);
  const after = await seconds();
  assert.ok(ms >= before * 1000 && ms <= after * 1000, `${ms} ms, ${before}..${after} s`);
});

test('a Redis user not allowed INFO is refused at the version check, also where the start reads no uptime (claims settle off): every start alike (redisrest F3)', async (t) => {
  await admin.call('ACL', 'SETUSER', 'noinfo', 'on', '>noinfo-password', '~*', '&*', '+@all', '-info');
  t.after(() => admin.call('ACL', 'DELUSER', 'noinfo'));
  const url = server.url.replace('redis://', 'redis://noinfo:noinfo-password@');
  const err = await startRefusal(t, { redisUrl: url, redisPrefix: 'noinfo:', storeDurability: 'relaxed' }, capturingLogger().logger);
  assert.equal(err?.name, 'StartupError', 'started');
  assert.match(err.message, /^cannot use Redis at redis:\/\/noinfo:\*\*\*@[^ ]+: Redis refuses the command INFO to the ACL user of PIXIU_REDIS_URL \(NOPERM\): grant it \(ACL SETUSER <user> \+info\)/);
});

test('a Redis user not allowed CONFIG: the start-up check warns of nothing it cannot read, nor rejects; it says why, once, at warn', async (t) => {
  await admin.config('SET', 'appendonly', 'yes');
  {
    const { logger, lines } = capturingLogger();
    assert.equal((await checkSettings(admin, server.url, logger)).persistence, 'aof');
    assert.deepEqual(lines.map((l) => l.msg), [], 'AOF: nothing to say');
  }
  await admin.call('ACL', 'SETUSER', 'noconfig', 'on', '>noconfig-password', '~*', '&*', '+@all', '-config');
  const limited = await createRedis({ url: server.url.replace('redis://', 'redis://noconfig:noconfig-password@'), commandTimeoutMs: 5000 });
  t.after(async () => {
    await limited.quit();
    await admin.call('ACL', 'DELUSER', 'noconfig');
  });
  await admin.config('SET', 'appendonly', 'no'); // what it would warn about, could it read it
  await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
  try {
    const { logger, lines } = capturingLogger();
    const read = await checkSettings(limited, server.url, logger, 30_000);
    assert.deepEqual(read, { persistence: undefined, policy: undefined }, 'nothing read, and no retry: a refusal is for good');
    assert.deepEqual(lines.map((l) => [l.level, l.msg]), [[40, UNREAD_NOPERM]]);
  } finally {
    await admin.config('SET', 'appendonly', 'yes');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
  }
});

/** The start's warning when CONFIG GET is refused to its ACL user (walk24 M1). */
const UNREAD_NOPERM = 'cannot check how Redis persists and evicts: CONFIG GET is not allowed to the ACL user of PIXIU_REDIS_URL (NOPERM; grant +config|get to have them checked). '
  + 'Make sure by hand that it runs with appendonly yes, appendfsync everysec (or always) and maxmemory-policy noeviction, '
  + 'or a Redis restart or eviction loses acknowledged messages; this node will not warn about them (DESIGN.md §4, storage/redis.conf)';

test('a service started as a user not allowed CONFIG GET warns once, at warn, that it cannot check the settings and what to verify by hand', async (t) => {
  await admin.call('ACL', 'SETUSER', 'noconfigget', 'on', '>noconfigget-password', '~*', '&*', '+@all', '-@dangerous', '+info');
  t.after(() => admin.call('ACL', 'DELUSER', 'noconfigget'));
  const { logger, lines } = capturingLogger();
  const url = server.url.replace('redis://', 'redis://noconfigget:noconfigget-password@');
  await startAndClose(t, url, 'noconfigget:', logger);
  const warnings = lines.filter((l) => l.level >= 40 && /Redis/.test(l.msg ?? ''));
  assert.deepEqual(warnings.map((l) => l.msg), [UNREAD_NOPERM]);
  assert.match(String(warnings[0]?.['reason']), /^NOPERM .*'config\|get' command/);
});

test('a service started on a Redis that renamed CONFIG away warns once that it cannot check the settings', async (t) => {
  const renamed = await RedisServer.start({ aof: false, args: ['--rename-command', 'CONFIG', ''] });
  t.after(() => renamed.destroy());
  const { logger, lines } = capturingLogger();
  await startAndClose(t, renamed.url, 'noconfig:', logger);
  const warnings = lines.filter((l) => l.level >= 40 && /Redis/.test(l.msg ?? ''));
  assert.equal(warnings.length, 1, JSON.stringify(warnings));
  assert.match(warnings[0]?.msg ?? '', /^cannot check how Redis persists and evicts: this Redis does not know CONFIG \(renamed or disabled\)\. Make sure by hand that it runs with appendonly yes/);
});

test('a service started on a Redis with AOF but appendfsync no warns once, naming it (walk24 L4); everysec does not', async (t) => {
  await admin.config('SET', 'appendonly', 'yes');
  try {
    for (const [fsync, warned] of [['no', true], ['everysec', false]] as const) {
      await admin.config('SET', 'appendfsync', fsync);
      const { logger, lines } = capturingLogger();
      await startAndClose(t, server.url, `fsync-${fsync}:`, logger);
      const warnings = lines.filter((l) => l.level >= 40 && /Redis/.test(l.msg ?? ''));
      assert.equal(warnings.length, warned ? 1 : 0, `appendfsync ${fsync}: ${JSON.stringify(warnings)}`);
      if (warned) assert.match(warnings[0]?.msg ?? '', /^Redis writes its AOF without fsync \(appendfsync no\): .* run it with appendfsync everysec or always/);
    }
  } finally {
    await admin.config('SET', 'appendfsync', 'everysec');
  }
});

/** An EVAL whose reply is Redis's own while it loads its data after a restart: a failure that may pass. */
const LOADING_REPLY = ['EVAL', "return redis.error_reply('LOADING Redis is loading the dataset in memory')", '0'];

test('a service whose start-up CONFIG GET fails for a moment says it will read again, and warns about appendonly no once Redis answers (review35b F2)', async (t) => {
  await admin.config('SET', 'appendonly', 'no');
  await admin.config('SET', 'save', '');
  t.after(() => admin.config('SET', 'appendonly', 'yes'));
  // The node's first CONFIG GET meets LOADING; every later one passes.
  const proxy = await CommandSwapProxy.start({ host: '127.0.0.1', port: server.port }, 'config', LOADING_REPLY);
  t.after(() => proxy.close());
  const { logger, lines } = capturingLogger();
  await startInProcess(t, { redisUrl: proxy.url, redisPrefix: 'persist-blip:', storeDurability: 'relaxed' }, logger);
  assert.equal(proxy.left, 0, 'the start-up CONFIG GET met LOADING');
  const warnings = (): string[] => lines.filter((l) => l.level >= 40 && /Redis/.test(l.msg ?? '')).map((l) => l.msg ?? '');
  assert.deepEqual(warnings(), ['could not read how Redis persists and evicts at start (LOADING Redis is loading the dataset in memory): '
    + 'this node reads them again every 30 s and after each reconnect, and warns then if they are unsafe (DESIGN.md §4)'], 'no "cannot check" for good');
  // The node's connections dropped (the admin's own is skipped): its reconnect reads them.
  await admin.call('CLIENT', 'KILL', 'TYPE', 'normal');
  await waitUntil('the start-up warning, once Redis answers', () => Promise.resolve(warnings().some((m) => /^Redis does not persist/.test(m))), 10_000, 20);
  const persisting = lines.filter((l) => /^Redis does not persist/.test(l.msg ?? ''));
  assert.deepEqual(persisting.map((l) => [l.level, l.changedFrom]), [[40, undefined]], 'the start-up\'s warning, once');
});

test('a Redis that does not answer some settings: the start-up check names what it could not read, and checks the rest (F5)', async (t) => {
  await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
  t.after(() => admin.config('SET', 'maxmemory-policy', 'noeviction'));
  // A CONFIG GET answered without appendonly, save and appendfsync (as a managed Redis hiding them would).
  const proxy = await CommandSwapProxy.start({ host: '127.0.0.1', port: server.port }, 'config', ['EVAL', "return {'maxmemory-policy','allkeys-lru','maxmemory','0'}", '0']);
  t.after(() => proxy.close());
  const { logger, lines } = capturingLogger();
  await startAndClose(t, proxy.url, 'persist-partial:', logger);
  const warnings = lines.filter((l) => l.level >= 40 && /Redis/.test(l.msg ?? '')).map((l) => l.msg ?? '');
  assert.equal(warnings.length, 2, JSON.stringify(warnings));
  assert.match(warnings[0] ?? '', /^Redis may evict keys \(maxmemory-policy allkeys-lru\)/);
  assert.equal(warnings[1], 'cannot check how Redis persists: this Redis did not answer CONFIG GET appendonly save appendfsync. '
    + 'Make sure by hand that it runs with appendonly yes and appendfsync everysec (or always), or a Redis restart loses acknowledged messages; '
    + 'this node will not warn about them (DESIGN.md §4, storage/redis.conf)');
});

test('a CONFIG GET failure that may pass (no reply, LOADING) is read again; any other error reply is Redis\'s answer for good: "cannot check" (review36)', () => {
  for (const [err, retry] of [
    [new Error('Command timed out'), true],
    [new ReplyError('LOADING Redis is loading the dataset in memory'), true],
    [new ReplyError('BUSY Redis is busy running a script'), true],
    [new ReplyError('ERR unsupported command'), false],
  ] as const) {
    const { logger, lines } = capturingLogger();
    const read = settingsChecked(err, 'redis://test', logger, 30_000);
    assert.equal(read.retry === true, retry, err.message);
    const said = lines.map((l) => l.msg ?? '');
    if (retry) assert.match(said.join('\n'), /^could not read how Redis persists and evicts at start \(/, err.message);
    else {
      assert.deepEqual(said, ['cannot check how Redis persists and evicts: this Redis answers CONFIG GET with an error (ERR unsupported command). '
        + 'Make sure by hand that it runs with appendonly yes, appendfsync everysec (or always) and maxmemory-policy noeviction, '
        + 'or a Redis restart or eviction loses acknowledged messages; this node will not warn about them (DESIGN.md §4, storage/redis.conf)']);
    }
  }
});

test('the unread-settings warning names only what was not read: eviction alone', () => {
  const { logger, lines } = capturingLogger();
  const read = settingsChecked(new Map([['appendonly', 'yes'], ['save', ''], ['appendfsync', 'everysec']]), 'redis://test', logger);
  assert.deepEqual([read.persistence, read.policy], ['aof', undefined]);
  assert.deepEqual(lines.map((l) => [l.level, l.msg, l['unanswered']]), [[40, 'cannot check how Redis evicts: this Redis did not answer CONFIG GET maxmemory-policy maxmemory. '
    + 'Make sure by hand that it runs with maxmemory-policy noeviction, or eviction loses acknowledged messages; this node will not warn about it (DESIGN.md §4, storage/redis.conf)',
  ['maxmemory-policy', 'maxmemory']]]);
});

test('a maxmemory not answered is not known, never "none" (walk29 F6); an appendfsync answered safe is not asked to be checked by hand', () => {
  const { logger, lines } = capturingLogger();
  const read = settingsChecked(new Map([['appendonly', 'yes'], ['save', ''], ['appendfsync', 'everysec'], ['maxmemory-policy', 'allkeys-lru']]), 'redis://test', logger);
  assert.deepEqual([read.policy, read.maxmemory], ['allkeys-lru', undefined]);
  assert.equal(lines.length, 1, JSON.stringify(lines));
  assert.match(lines[0]?.msg ?? '', /^Redis may evict keys \(maxmemory-policy allkeys-lru\): when it reaches its maxmemory \(not known: this Redis did not answer CONFIG GET maxmemory\) it drops inbox entries/);
  assert.deepEqual([lines[0]?.['maxmemory'], lines[0]?.['unanswered']], [undefined, ['maxmemory']]);
  // appendonly alone unanswered: appendfsync everysec was read, so only appendonly is left to check.
  const partial = capturingLogger();
  settingsChecked(new Map([['save', ''], ['appendfsync', 'everysec'], ['maxmemory-policy', 'noeviction'], ['maxmemory', '0']]), 'redis://test', partial.logger);
  assert.deepEqual(partial.lines.map((l) => l.msg), ['cannot check how Redis persists: this Redis did not answer CONFIG GET appendonly. '
    + 'Make sure by hand that it runs with appendonly yes, or a Redis restart loses acknowledged messages; this node will not warn about it (DESIGN.md §4, storage/redis.conf)']);
});
