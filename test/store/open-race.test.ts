/**
 * Two processes opening one message store at the same moment (two starts on one data
 * dir with a shared Redis, where nothing locks the data dir before the store opens:
 * README "Two starts on one data dir"; docs/decisions.md, "Partition 0's lock is the
 * store's"). Exactly one opens it, every time; the other fails on partition 0 with the
 * documented "locked by another process" line, naming no other partition.
 *
 * Before, the partitions were opened all at once, each its own LevelDB lock, so the two
 * could each win some of them and both fail (a review: 4 rounds of 12).
 *
 * Two real processes (test/store/fixtures/open-race-child.ts), each told to open a
 * fresh store folder at one moment on the wall clock, {@link ROUNDS} times.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT, nodeArgsFor, siblingModule } from '../harness/test-build.js';
import { spawnTied } from '../harness/tied-spawn.js';
import { tempDir } from './fixtures/store-harness.js';
import type { RaceReply, RaceRequest } from './fixtures/open-race-child.js';

const CHILD = siblingModule(import.meta.url, './fixtures/open-race-child');
/** Rounds: each a fresh folder opened by both processes at once. */
const ROUNDS = 16;
/** How far ahead the moment of a round's opens is set, ms: both children have it by then. */
const LEAD_MS = 50;

/** A child and its replies, in order. */
class Racer {
  readonly #proc: ChildProcess;
  readonly #replies: RaceReply[] = [];
  #waiting: { resolve: (reply: RaceReply) => void; reject: (err: Error) => void } | undefined;

  constructor() {
    this.#proc = spawnTied(process.execPath, nodeArgsFor(CHILD), { cwd: REPO_ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.#proc.on('message', (reply: RaceReply) => {
      const waiting = this.#waiting;
      this.#waiting = undefined;
      if (waiting) waiting.resolve(reply);
      else this.#replies.push(reply);
    });
    this.#proc.on('exit', (code) => this.#waiting?.reject(new Error(`the racer exited (${code})`)));
  }

  /** Sends `request` (when given) and resolves with the next reply. */
  next(request?: RaceRequest): Promise<RaceReply> {
    if (request) this.#proc.send(request);
    const queued = this.#replies.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject };
    });
  }

  stop(): void {
    this.#proc.disconnect();
  }
}

test('two processes opening one store at the same moment: exactly one opens it, the other fails on partition 0 as locked', { timeout: 120_000 }, async (t) => {
  const racers = [new Racer(), new Racer()];
  t.after(() => racers.forEach((r) => r.stop()));
  for (const r of racers) assert.deepEqual(await r.next(), { op: 'ready' });
  const root = await tempDir(t);
  for (let round = 0; round < ROUNDS; round++) {
    const dir = path.join(root, String(round));
    const at = Date.now() + LEAD_MS;
    const replies = await Promise.all(racers.map((r) => r.next({ op: 'open', dir, at })));
    const opened = replies.filter((r) => r.op === 'opened').length;
    assert.equal(opened, 1, `round ${round}: exactly one opens the store: ${JSON.stringify(replies)}`);
    const failed = replies.find((r) => r.op === 'failed');
    assert.deepEqual(failed, {
      op: 'failed',
      message: `store partition folder ${path.join(dir, '0')} is locked by another process (its LevelDB LOCK is held): another pixiu may be using this data dir`,
    }, `round ${round}`);
    for (const reply of await Promise.all(racers.map((r) => r.next({ op: 'close' })))) assert.deepEqual(reply, { op: 'closed' });
  }
});
