import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { nodeArgsFor, siblingModule } from '../harness/test-build.js';
import { spawnTied } from '../harness/tied-spawn.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';

const FIXTURE = siblingModule(import.meta.url, './fixtures/append-many');
const PER_PROCESS = 1000;

let server: RedisServer;
let redis: Redis;

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
});

after(async () => {
  await redis?.quit();
  await server?.destroy();
});

interface ChildResult { id: string; seq: number; epoch: string; duplicate: boolean }

/** A fixture process, with its stdout lines collected. */
interface Child {
  readonly proc: ChildProcess;
  /** Resolves at the `ready` line. */
  readonly ready: Promise<void>;
  /** Resolves with the JSON results once the process has exited with code 0. */
  readonly done: Promise<ChildResult[]>;
}

function startChild(args: string[]): Child {
  const proc = spawnTied(process.execPath, [...nodeArgsFor(FIXTURE), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => { onReady = resolve; });
  proc.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (out.startsWith('ready\n')) onReady();
  });
  proc.stderr?.on('data', (chunk: Buffer) => { err += chunk.toString(); });
  const done = once(proc, 'exit').then(([code]) => {
    assert.equal(code, 0, `fixture failed:\n${err}`);
    const line = out.split('\n')[1] ?? '';
    return JSON.parse(line) as ChildResult[];
  });
  // A child that dies before `ready` must fail the test, not leave it waiting.
  const readyOrDead = Promise.race([ready, done.then(() => { throw new Error(`fixture exited before ready:\n${err}`); })]);
  return { proc, ready: readyOrDead, done };
}

test('2,000 concurrent appends from two processes get seqs 1..2000 exactly once each', async () => {
  const uid = 'race-user';
  const children = [startChild([server.url, 'px:', uid, '1', String(PER_PROCESS)]), startChild([server.url, 'px:', uid, '2', String(PER_PROCESS)])];
  await Promise.all(children.map((c) => c.ready));
  for (const c of children) c.proc.stdin?.write('go\n');
  const results = (await Promise.all(children.map((c) => c.done))).flat();

  assert.equal(results.length, 2 * PER_PROCESS);
  assert.ok(results.every((r) => !r.duplicate), 'no append is a duplicate');
  assert.equal(new Set(results.map((r) => r.epoch)).size, 1, 'one epoch for the inbox');
  const seqs = results.map((r) => r.seq).sort((a, b) => a - b);
  assert.deepEqual(seqs, Array.from({ length: 2 * PER_PROCESS }, (_, i) => i + 1), 'seqs are exactly 1..2000');

  const keys = new Keys('px:').user(uid);
  assert.equal(await redis.xlen(keys.inbox), 2 * PER_PROCESS);
  const stream = await redis.xrange(keys.inbox, '-', '+');
  const bySeq = new Map(results.map((r) => [r.seq, r.id]));
  for (const [entryId, fields] of stream) {
    const seq = Number.parseInt(entryId, 10);
    assert.equal(entryId, `${seq}-0`);
    assert.equal(fields[fields.indexOf('id') + 1], bySeq.get(seq), `entry ${entryId} holds the MsgID given that seq`);
  }
  assert.equal(new Set(stream.map(([, f]) => f[f.indexOf('id') + 1])).size, 2 * PER_PROCESS, 'the stream maps to 2,000 distinct MsgIDs');
});
