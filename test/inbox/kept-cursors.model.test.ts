/**
 * Model check of the ack cursors across epoch changes (ack-7.lua, rotate-7.lua,
 * append-13.lua with keep-cursors.lua; docs/decisions.md "Stored cursors across a new
 * epoch"): random runs of appends, acks (of the current epoch, of the one before, of an
 * older one, of none, of a made-up one), rotations, generation raises and losses of the
 * inbox (its epoch then created afresh, with no lineage), under device-cap pressure,
 * against a plain model of the documented rules; after each step the acks
 * hash, the kept cursors and Inbox.deviceCursor of every device must be the model's,
 * and (the rules' promises) no device's cursor is one it never acked, moves back within an
 * epoch, and the user holds at most twice the most device cursors.
 * Real Redis (a private redis-server), no mocks; a fixed seed (SEED and RUNS in the
 * environment override it and the 60 runs, to explore).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { RedisServer } from '../harness/redis-server.js';
import { openInbox } from '../harness/checks.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { Keys } from '../../src/redis/keys.js';

const DEVICES = ['a', 'b', 'c', 'd', 'e'];

type EpochPick = 'cur' | 'prev' | 'older' | 'none' | 'made-up';
type Op =
  | { op: 'append'; n: number }
  | { op: 'raise' }
  | { op: 'rotate' }
  | { op: 'lose' }
  | { op: 'ack'; device: number; back: number; ep: EpochPick };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('append' as const), n: fc.integer({ min: 1, max: 3 }) }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('raise' as const) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('rotate' as const) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('lose' as const) }), weight: 1 },
  {
    arbitrary: fc.record({
      op: fc.constant('ack' as const), device: fc.nat(DEVICES.length - 1), back: fc.nat(4),
      ep: fc.constantFrom<EpochPick>('cur', 'cur', 'cur', 'prev', 'prev', 'older', 'none', 'made-up'),
    }),
    weight: 6,
  },
);

/** The documented rules, in memory. */
class Model {
  /** Every epoch the inbox had, oldest first (the last is the current one unless the inbox is lost). */
  epochs: string[] = [];
  /** The inbox's epoch; undefined: none yet, or Redis lost it. */
  epoch: string | undefined;
  /** The current epoch's lineage: the epoch it replaced (none for one created afresh). */
  lineage: { epoch: string; replaced: string } | undefined;
  latest = 0;
  acks = new Map<string, number>();
  kept = new Map<string, { seq: number; epoch: string }>();
  constructor(readonly most: number) {}

  /** The first append makes an epoch afresh: the cursors of a lost inbox go, no lineage. */
  create(epoch: string): void {
    this.epochs.push(epoch);
    this.epoch = epoch;
    this.lineage = undefined;
    this.acks.clear();
    this.kept.clear();
  }

  /** Redis lost the inbox's stream, meta and ids (the kept cursors with the meta); the acks hash stays until the next append. */
  lose(): void {
    this.epoch = undefined;
    this.lineage = undefined;
    this.kept.clear();
  }

  /** A new epoch replaces the current one: the cursors move to kept, older kept ones bounded. */
  rotate(fresh: string): void {
    const replaced = this.epoch as string;
    const moved = [...this.acks];
    const older = [...this.kept.keys()].filter((d) => !this.acks.has(d)).sort((x, y) => (`cursor ${x}` < `cursor ${y}` ? -1 : 1));
    const room = Math.max(0, this.most - moved.length);
    for (const d of older.slice(room)) this.kept.delete(d);
    for (const [d, seq] of moved) this.kept.set(d, { seq, epoch: replaced });
    this.acks.clear();
    this.epochs.push(fresh);
    this.lineage = { epoch: fresh, replaced };
    this.epoch = fresh;
  }

  /** The cursor after the ack, as Inbox.ack answers it: null for an ack of an epoch that is not the inbox's (ack-7.lua). */
  ack(device: string, seq: number, epoch: string): number | null {
    const old = this.acks.get(device) ?? 0;
    if (this.epoch === undefined) return epoch === '' ? old : null;
    if (epoch !== '' && epoch !== this.epoch) {
      const k = this.kept.get(device);
      if (k !== undefined && k.epoch === epoch) {
        if (seq > k.seq) this.kept.set(device, { seq, epoch });
      } else if (!this.acks.has(device) && seq > 0 && this.lineage?.epoch === this.epoch && this.lineage.replaced === epoch
        && (k !== undefined || this.kept.size < this.most)) {
        // The first ack of the epoch just replaced, on its way as the rotation came: the cursor the rotation would have kept.
        this.kept.set(device, { seq, epoch });
      }
      return null;
    }
    if (seq <= old) return old;
    const added = !this.acks.has(device);
    this.acks.set(device, seq);
    if (added) this.kept.delete(device);
    if (added && this.acks.size > this.most) {
      const others = [...this.acks].filter(([d]) => d !== device).sort((x, y) => (x[1] !== y[1] ? x[1] - y[1] : x[0] < y[0] ? -1 : 1));
      for (const [d] of others.slice(0, others.length + 1 - this.most)) this.acks.delete(d);
    }
    return seq;
  }

  cursor(device: string): { seq: number; epoch: string | undefined } | undefined {
    const seq = this.acks.get(device);
    if (seq !== undefined) return { seq, epoch: this.epoch };
    return this.kept.get(device);
  }
}

test('ack cursors across epoch changes follow the documented rules (random runs, fixed seed)', async (t) => {
  const own = await RedisServer.start();
  t.after(() => own.destroy());
  const { redis } = await openInbox(t, own.url, 'km:');
  const keys = new Keys('km:');
  let run = 0;
  await fc.assert(fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(opArb, { minLength: 5, maxLength: 40 }), async (most, ops) => {
    run += 1;
    const uid = `u${String(run)}`;
    const gen = { value: 0 };
    const inbox = new Inbox(redis, { prefix: 'km:', cap: 5, deviceCursors: most, generation: () => gen.value });
    const model = new Model(most);
    /** Per device and epoch, the highest seq it acked under it (the client's own word). */
    const acked = new Map<string, number>();
    /** Per device, the last (seq, epoch) deviceCursor gave. */
    const seen = new Map<string, { seq: number; epoch: string | undefined }>();
    let counter = run * 1000;
    for (const o of ops) {
      if (o.op === 'append' || o.op === 'raise') {
        if (o.op === 'raise') gen.value += 1;
        for (let i = 0; i < (o.op === 'raise' ? 1 : o.n); i++) {
          const r = await inbox.append(uid, encodeMsgId({ partition: 0, kind: MsgKind.user, counter: counter++ }), MsgKind.user);
          if (model.epoch === undefined) model.create(r.epoch);
          else if (r.epoch !== model.epoch) model.rotate(r.epoch);
          model.latest = r.seq;
        }
      } else if (o.op === 'lose') {
        const k = keys.user(uid);
        await redis.del(k.meta, k.inbox, k.ids);
        model.lose();
      } else if (o.op === 'rotate') {
        if (model.epoch === undefined) continue;
        const fresh = await inbox.rotateEpoch(uid, model.epoch);
        assert.ok(fresh !== null && fresh !== model.epoch);
        model.rotate(fresh);
      } else {
        const device = DEVICES[o.device] as string;
        const seq = Math.max(0, model.latest - o.back);
        const epoch = o.ep === 'cur' ? model.epoch
          : o.ep === 'prev' ? model.epochs.at(-2)
          : o.ep === 'older' ? model.epochs.at(-3)
          : o.ep === 'made-up' ? 'no-such-epoch' : undefined;
        if ((o.ep === 'prev' || o.ep === 'older') && epoch === undefined) continue;
        const got = await inbox.ack(uid, device, seq, epoch);
        const ep = epoch ?? model.epoch ?? '';
        const key = `${device} ${ep}`;
        if (model.epoch !== undefined) acked.set(key, Math.max(acked.get(key) ?? 0, seq));
        assert.equal(got, model.ack(device, seq, epoch ?? ''), `ack ${JSON.stringify(o)}`);
      }
      // Redis holds what the model does.
      const acks = await redis.hgetall(keys.acks(uid));
      assert.deepEqual(acks, Object.fromEntries([...model.acks].map(([d, s]) => [d, String(s)])), `acks after ${JSON.stringify(o)}`);
      const meta = await redis.hgetall(keys.meta(uid));
      const kept = Object.fromEntries(Object.entries(meta).filter(([f]) => f.startsWith('cursor ')));
      assert.deepEqual(kept, Object.fromEntries([...model.kept].map(([d, k]) => [`cursor ${d}`, `${String(k.seq)} ${k.epoch}`])), `kept after ${JSON.stringify(o)}`);
      assert.ok(Object.keys(acks).length <= most && Object.keys(kept).length <= most, 'at most the most device cursors of each kind');
      for (const device of DEVICES) {
        const c = await inbox.deviceCursor(uid, device);
        assert.deepEqual(c, model.cursor(device), `${device} after ${JSON.stringify(o)}`);
        if (c === undefined) { seen.delete(device); continue; }
        // Never one it did not ack, never back within one epoch (a cursor of a lost inbox, epoch unknown, counts in the last one).
        assert.ok(c.seq <= (acked.get(`${device} ${c.epoch ?? model.epochs.at(-1) ?? ''}`) ?? 0), `${device}'s cursor ${JSON.stringify(c)} is one it acked`);
        const before = seen.get(device);
        if (before !== undefined && before.epoch === c.epoch) assert.ok(c.seq >= before.seq, `${device} moved back: ${JSON.stringify(before)} -> ${JSON.stringify(c)}`);
        seen.set(device, c);
      }
    }
  }), { seed: Number(process.env.SEED ?? 20261206), numRuns: Number(process.env.RUNS ?? 60) });
});
