/**
 * `pixiu inspect …` and `pixiu redis …` run by a user other than the service's, on a
 * data dir whose embedded Redis runs: its folder is private to the service's user
 * (0700, docs/decisions.md "The data dir is private to the service's user"), so this
 * user cannot see the socket, or it sees the socket (unixsocketperm 700) but may not
 * connect. Either is said, with the user to run as — not "no embedded Redis running"
 * (review3 F1); and `pixiu token`, whose kept key is as private (walk38 F8). Needs root,
 * to run the CLI as `nobody`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { runCli, type CleanupContext } from '../harness/pixiu-server.js';

const NOBODY = { uid: 65534, gid: 65534 };

/**
 * A data dir under a folder every user may search, with a socket listening at
 * `redis/redis.sock` (the embedded Redis's place; nothing needs to answer: the
 * refusals come first), the data dir and `redis/` in `mode`.
 */
async function dataDirWithSocket(t: CleanupContext, mode: number): Promise<{ dataDir: string; sock: string }> {
  const root = await realpath(await mkdtemp(path.join(os.tmpdir(), 'pixiu-private-redis-')));
  t.after(() => rm(root, { recursive: true, force: true }));
  await chmod(root, 0o755);
  const dataDir = path.join(root, 'data');
  await mkdir(path.join(dataDir, 'redis'), { recursive: true });
  await chmod(dataDir, mode);
  await chmod(path.join(dataDir, 'redis'), mode);
  const sock = path.join(dataDir, 'redis', 'redis.sock');
  const server = net.createServer((conn) => conn.destroy());
  await new Promise<void>((resolve) => server.listen(sock, resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { dataDir, sock };
}

test('inspect and redis lost-writes as another user, the data dir private to the service\'s: they say whose it is and to run as that user, not "no embedded Redis running"', async (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('needs root, to run the CLI as nobody');
    return;
  }
  const { dataDir, sock } = await dataDirWithSocket(t, 0o700);
  const env = { PIXIU_DATA_DIR: dataDir };
  const said = new RegExp(`^pixiu: cannot look for the embedded Redis's socket ${sock} \\(EACCES\\): ${dataDir} is private to the service's user \\(uid 0, its owner\\), not this one \\(uid 65534\\): run this command as that user \\(e\\.g\\. sudo -u '#0' pixiu …\\)\\n$`);
  const [inbox, lostWrites] = await Promise.all([
    runCli(['inspect', 'inbox', 'ann'], env, NOBODY),
    runCli(['redis', 'lost-writes'], env, NOBODY),
  ]);
  for (const run of [inbox, lostWrites]) {
    assert.equal(run.code, 1, run.stdout);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, said);
  }
  // inspect id decodes without a Redis: the id, and why there is no holder.
  const id = encodeMsgId({ partition: 3, kind: MsgKind.user, counter: 7 });
  const decoded = await runCli(['inspect', 'id', id], env, NOBODY);
  assert.equal(decoded.code, 0, decoded.stderr);
  assert.deepEqual(JSON.parse(decoded.stdout), { id, partition: 3, kind: 'user', counter: 7 });
  assert.match(decoded.stderr, /^the partition's holder is not shown: cannot look for the embedded Redis's socket .* is private to the service's user \(uid 0, its owner\)/);
});

test('inspect as another user who sees the embedded Redis\'s socket but may not connect to it (0700): the connect refusal, and to run as the socket\'s owner', async (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('needs root, to run the CLI as nobody');
    return;
  }
  // Folders open (a data dir made before they were private), the socket as redis-server makes it.
  const { dataDir, sock } = await dataDirWithSocket(t, 0o755);
  await chmod(sock, 0o700);
  const run = await runCli(['inspect', 'inbox', 'ann'], { PIXIU_DATA_DIR: dataDir }, NOBODY);
  assert.equal(run.code, 1, run.stdout);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, new RegExp(`^pixiu: cannot reach Redis at unix://${sock}: .*EACCES.*: the embedded Redis's socket is private to the service's user \\(uid 0, its owner\\), not this one \\(uid 65534\\): run this command as that user \\(e\\.g\\. sudo -u '#0' pixiu …\\)\\n$`));
});

test('token as another user, the data dir private to the service\'s: it says whose the kept key is and to run as that user, not a bare EACCES (walk38 F8)', async (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('needs root, to run the CLI as nobody');
    return;
  }
  const { dataDir } = await dataDirWithSocket(t, 0o700);
  await mkdir(path.join(dataDir, 'secrets'), { mode: 0o700 });
  await writeFile(path.join(dataDir, 'secrets', 'jwt-secret'), `${'k'.repeat(43)}\n`, { mode: 0o600 });
  const run = await runCli(['token', 'alice'], { PIXIU_DATA_DIR: dataDir }, NOBODY);
  assert.equal(run.code, 1, run.stdout);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, new RegExp(`^pixiu: cannot read ${path.join(dataDir, 'secrets', 'jwt-secret')}: permission denied \\(EACCES\\): ${dataDir} is private to the service's user \\(uid 0, its owner\\), not this one \\(uid 65534\\): run this command as that user \\(e\\.g\\. sudo -u '#0' pixiu …\\)\\n$`));
});
