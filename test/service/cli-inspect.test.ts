/**
 * `pixiu inspect` (ops): `id` decodes a MsgID; `inbox` prints a user's inbox bounds,
 * entries and ack cursors from Redis, reading a running service's Redis and never
 * starting one. Bad input exits 1 with a message saying what was wrong.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Keys } from '../../src/redis/keys.js';
import { INBOX_RETENTION_GRACE_MS } from '../../src/inbox/inbox.js';
import { openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { runCliOnce } from '../harness/cli-process.js';
import { runCli, runEach, tempDataDir, type CleanupList } from '../harness/pixiu-server.js';
import type { RedisServer } from '../harness/redis-server.js';

let redis: RedisServer;
let files: CleanupList;

fileRedis(async (ctx) => {
  ({ redis, cleanup: files } = ctx);
});

test('inspect id decodes a MsgID; a malformed one exits 1 naming the rule', async () => {
  const id = encodeMsgId({ partition: 5, kind: MsgKind.room, counter: 42 });
  const run = await runCli(['inspect', 'id', id]);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), { id, partition: 5, kind: 'room', counter: 42 });
  const bad = await runCli(['inspect', 'id', 'xyz']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /16/);
});

test('inspect id with a Redis to read names the store holding the partition and its node\'s URL; no lease: url null; unclaimed: null; Redis not answering: the decoded id and a note', async () => {
  const { redis: probe } = await openInbox(files, redis.url, 'holder:');
  const keys = new Keys('holder:');
  await probe.hset(keys.storePartitions(), '5', 'store-a', '6', 'store-b', '7', 'retired');
  await probe.set(keys.storeLease('store-a'), JSON.stringify({ url: 'http://10.0.0.5:8080', node: 'vm-1-abc' }), 'PX', 60_000);
  const env = { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'holder:' };
  const holderOf = async (partition: number, runEnv: Record<string, string> = env): Promise<unknown> => {
    const id = encodeMsgId({ partition, kind: MsgKind.user, counter: 1 });
    const run = await runCli(['inspect', 'id', id], runEnv);
    assert.equal(run.code, 0, run.stderr);
    const shown = JSON.parse(run.stdout) as { id: string; holder?: unknown };
    assert.equal(shown.id, id);
    return 'holder' in shown ? shown.holder : 'absent';
  };
  const [held, stopped, retired, unclaimed] = await Promise.all([5, 6, 7, 8].map((p) => holderOf(p)));
  assert.deepEqual(held, { store: 'store-a', url: 'http://10.0.0.5:8080', node: 'vm-1-abc' });
  assert.deepEqual(stopped, { store: 'store-b', url: null });
  assert.deepEqual(retired, { store: 'retired', url: null });
  assert.equal(unclaimed, null);
  // A Redis that does not answer (nothing listens on port 1): the decoding alone, exit 0, and why on stderr.
  const id = encodeMsgId({ partition: 5, kind: MsgKind.user, counter: 1 });
  const down = await runCli(['inspect', 'id', id], { PIXIU_REDIS_URL: 'redis://127.0.0.1:1', PIXIU_REDIS_COMMAND_TIMEOUT: '500' });
  assert.equal(down.code, 0, down.stderr);
  assert.deepEqual(JSON.parse(down.stdout), { id, partition: 5, kind: 'user', counter: 1 });
  assert.match(down.stderr, /holder is not shown: Redis could not be read/);
});

test('inspect inbox prints the epoch, bounds, when the keys expire, entries after --after-seq (a room message\'s with its room; each with its message\'s expiry, `exp`) and the ack cursors', async () => {
  const { inbox } = await openInbox(files, redis.url, 'insp:');
  // The second a room message: its entry names the room.
  const kinds = [MsgKind.user, MsgKind.room, MsgKind.user];
  const ids = kinds.map((kind, i) => encodeMsgId({ partition: 0, kind, counter: i + 1 }));
  let epoch = '';
  const expiresAt = Date.now() + 3_600_000;
  for (const [i, id] of ids.entries()) {
    const kind = kinds[i] as MsgKind;
    epoch = (await inbox.append('ann', id, kind, { expiresAt, ...(kind === MsgKind.room ? { room: 'lobby' } : {}) })).epoch;
  }
  await inbox.ack('ann', 'phone', 2, epoch);
  const run = await runCli(['inspect', 'inbox', 'ann', '--after-seq', '1', '--limit', '1'], { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'insp:' });
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), {
    user: 'ann', epoch, first_seq: 1, latest_seq: 3, expires_at: expiresAt + INBOX_RETENTION_GRACE_MS,
    entries: [{ seq: 2, id: ids[1], kind: 'room', room: 'lobby', exp: expiresAt }], cursors: { phone: 2 }, kept_cursors: {},
  });
});

test('inspect inbox shows the cursors a new epoch kept of the old one, with that epoch, until the device acks in the new one', async () => {
  const { inbox, redis: raw } = await openInbox(files, redis.url, 'insp-kept:');
  const ids = [1, 2, 3].map((counter) => encodeMsgId({ partition: 0, kind: MsgKind.user, counter }));
  let old = '';
  for (const id of ids.slice(0, 2)) old = (await inbox.append('kim', id, MsgKind.user)).epoch;
  await inbox.ack('kim', 'phone', 2, old);
  await inbox.ack('kim', 'tablet', 1, old);
  const fresh = await inbox.rotateEpoch('kim', old);
  assert.ok(fresh !== null && fresh !== old);
  // A value the scripts never write (set by hand) is no cursor: left out, not shown as one.
  await raw.hset(new Keys('insp-kept:').user('kim').meta, 'cursor laptop', 'not a cursor');
  const env = { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'insp-kept:' };
  const rotated = await runCli(['inspect', 'inbox', 'kim'], env);
  assert.equal(rotated.code, 0, rotated.stderr);
  const shown = JSON.parse(rotated.stdout) as { epoch: string; cursors: unknown; kept_cursors: unknown };
  assert.equal(shown.epoch, fresh);
  assert.deepEqual(shown.cursors, {});
  assert.deepEqual(shown.kept_cursors, { phone: { seq: 2, epoch: old }, tablet: { seq: 1, epoch: old } });
  // The phone's first ack in the new epoch replaces its kept cursor; the tablet's stays.
  await inbox.append('kim', ids[2] ?? '', MsgKind.user);
  await inbox.ack('kim', 'phone', 1, fresh);
  const acked = await runCli(['inspect', 'inbox', 'kim'], env);
  assert.equal(acked.code, 0, acked.stderr);
  const after = JSON.parse(acked.stdout) as { cursors: unknown; kept_cursors: unknown };
  assert.deepEqual(after.cursors, { phone: 1 });
  assert.deepEqual(after.kept_cursors, { tablet: { seq: 1, epoch: old } });
});

test('inspect inbox shows an entry that is not what the append script writes as its seq, marked malformed, with the entries around it', async () => {
  const { inbox, redis: raw } = await openInbox(files, redis.url, 'insp-bad:');
  const ids = [1, 3].map((counter) => encodeMsgId({ partition: 0, kind: MsgKind.user, counter }));
  const { epoch } = await inbox.append('bo', ids[0] ?? '', MsgKind.user);
  await raw.xadd(new Keys('insp-bad:').inbox('bo'), '2-0', 'id', 'NOT-HEX', 'kind', '1');
  await inbox.append('bo', ids[1] ?? '', MsgKind.user);
  const run = await runCli(['inspect', 'inbox', 'bo'], { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'insp-bad:' });
  assert.equal(run.code, 0, run.stderr);
  const shown = JSON.parse(run.stdout) as { epoch: string; entries: unknown[] };
  assert.equal(shown.epoch, epoch);
  assert.deepEqual(shown.entries, [{ seq: 1, id: ids[0], kind: 'user' }, { seq: 2, malformed: true }, { seq: 3, id: ids[1], kind: 'user' }]);
});

test('inspect inbox of a key prefix no service has used exits 1 saying so, printing no inbox; an empty inbox under a used one exits 0', async () => {
  const unused = await runCli(['inspect', 'inbox', 'ann'], { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'nobody:' });
  assert.equal(unused.code, 1, unused.stdout);
  assert.equal(unused.stdout, '');
  assert.match(unused.stderr, /^pixiu: no Pixiu service has used the key prefix "nobody:" on this Redis .*--redis-prefix.*\n$/);
  // A service writes its cluster secret at start (src/cluster/cluster-secret.ts).
  const { redis: raw } = await openInbox(files, redis.url, 'used:');
  await raw.set(new Keys('used:').clusterSecret(), 'secret');
  const used = await runCli(['inspect', 'inbox', 'nobody-yet'], { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'used:' });
  assert.equal(used.code, 0, used.stderr);
  assert.equal(JSON.parse(used.stdout).epoch, null);
  assert.equal(used.stderr, '');
  const help = await runCliOnce(['inspect', 'inbox', '--help']);
  assert.match(help.stdout, /Exit status: 0 when the inbox is printed .*\n1 .* a key\nprefix no Pixiu service has used/s);
});

test('inspect inbox holds --after-seq and --limit to the API\'s integers: 0x2, 1e3, an empty value, -1, 1.5 and a --limit over 10000 exit 1 naming the option', async () => {
  const env = { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'insp:' };
  const cases = [['--after-seq', '0x2'], ['--after-seq', '1e3'], ['--after-seq', ''], ['--after-seq', '-1'], ['--limit', '1e1'], ['--limit', '0x2'], ['--limit', '1.5'], ['--limit', '0'], ['--limit', '10001']] as const;
  for (const [[option, value], run] of await runEach(cases, ([option, value]) => runCli(['inspect', 'inbox', 'ann', `${option}=${value}`], env))) {
    assert.equal(run.code, 1, `${option} ${value}: ${run.stdout}`);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, new RegExp(`${option} must be an integer from \\d+ to \\d+ written in decimal digits, got "${value.replace('.', '\\.')}"`), `${option} ${value}`);
  }
  // The top of --limit's range (its help: 1-10000) is taken.
  const top = await runCli(['inspect', 'inbox', 'ann', '--limit=10000'], env);
  assert.equal(top.code, 0, top.stderr);
});

test('inspect inbox refuses a user id that is not one, and says so', async () => {
  for (const [uid, run] of await runEach(['a b', 'tab\there', ''], (uid) => runCli(['inspect', 'inbox', uid], { PIXIU_REDIS_URL: redis.url }))) {
    assert.equal(run.code, 1, uid);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /invalid user id/, uid);
  }
});

test('inspect inbox without a Redis URL reads the embedded Redis of a running serve, never starts one; --help says so', async (t) => {
  const dataDir = await tempDataDir(t);
  const run = await runCli(['inspect', 'inbox', 'ann'], { PIXIU_DATA_DIR: dataDir });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /no PIXIU_REDIS_URL and no embedded Redis running under .*: set PIXIU_REDIS_URL to the Redis the service uses .*or start `pixiu serve` on this data dir without it/);
  const help = await runCliOnce(['inspect', 'inbox', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout.replace(/\s+/g, ' '), /--redis-url <value> Redis to read, .* unset: the embedded Redis of a `pixiu serve` running on the data dir/);
  assert.doesNotMatch(help.stdout, /start a local redis-server/);
});

test('inspect inbox has no --inbox-cap (the cap acts on appends, which inspect never makes): it is an unknown option, absent from --help, and a PIXIU_INBOX_CAP is not read', async () => {
  const env = { PIXIU_REDIS_URL: redis.url, PIXIU_REDIS_PREFIX: 'insp:' };
  const run = await runCli(['inspect', 'inbox', 'ann', '--inbox-cap', '2'], env);
  assert.equal(run.code, 1, run.stdout);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, /unknown option '--inbox-cap'/);
  const help = await runCliOnce(['inspect', 'inbox', '--help']);
  assert.doesNotMatch(help.stdout, /inbox-cap|trimmed/);
  // Not read from the environment either: a bad value of it does not stop a read.
  const envCap = await runCli(['inspect', 'inbox', 'ann'], { ...env, PIXIU_INBOX_CAP: 'lots' });
  assert.equal(envCap.code, 0, envCap.stderr);
});
