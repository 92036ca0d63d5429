/**
 * The message store against a model (DESIGN.md §3): seeded random runs of puts (with
 * and without `client_msg_id`, shared between puts, some in flight at once), clock
 * moves, sweeps, `remember`s, reads and reopens, with the read cache on, off and tiny.
 * Every acknowledged record reads back as put until it expires, a `client_msg_id` keeps
 * one id while its record lives, and no MsgID counter is ever used twice.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { counterOf, fakeClock, openStore, tempDir } from './fixtures/store-harness.js';
import type { MessageStore, PutResult } from '../../src/store/message-store.js';
import { decoded } from '../harness/checks.js';

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}

test('random puts, clock moves, sweeps and reopens agree with a model', async (t) => {
  for (let seed = 1; seed <= 6; seed++) {
    const dir = await tempDir(t);
    const clock = fakeClock();
    const r = rng(seed);
    const cacheBytes = seed % 2 === 0 ? 0 : 1 << 20;
    let store: MessageStore = await openStore(t, dir, { partitions: 2, now: clock.now, cacheBytes });
    const model = new Map<string, { data: number; expiresAt: number }>();
    const byCid = new Map<string, string>();
    const maxCounter = new Map<number, number>();
    let n = 0;
    for (let step = 0; step < 400; step++) {
      const op = r();
      if (op < 0.6) {
        const k = 1 + Math.floor(r() * 8);
        const puts = Array.from({ length: k }, () => {
          const useCid = r() < 0.6;
          const cid = useCid ? `c${Math.floor(r() * 20)}` : undefined;
          const ttlMs = 500 + Math.floor(r() * 5000);
          const data = n++;
          return { cid, ttlMs, data, p: store.put({ kind: 1, type: 't', data, to: ['u'], clientMsgId: cid, ttlMs }) };
        });
        for (const { cid, data, p } of puts) {
          const res = await p;
          if (cid !== undefined) {
            const prev = byCid.get(cid);
            const prevLive = prev !== undefined && (model.get(prev)?.expiresAt ?? 0) > clock.ms;
            if (prevLive) {
              assert.equal(res.duplicate, true, `seed ${seed} step ${step}: cid ${cid} live as ${prev}, got new ${res.id}`);
              assert.equal(res.id, prev);
              continue;
            }
          }
          if (!res.duplicate) {
            const part = parseInt(res.id.slice(0, 2), 16);
            const c = counterOf(res.id);
            assert.ok(c > (maxCounter.get(part) ?? 0), `seed ${seed}: counter ${c} reused in partition ${part}`);
            maxCounter.set(part, c);
            model.set(res.id, { data, expiresAt: res.message.expiresAt });
            if (cid !== undefined) byCid.set(cid, res.id);
          } else {
            // duplicate of a put in the same group of puts
            assert.equal(res.id, byCid.get(cid!), `seed ${seed}`);
          }
        }
      } else if (op < 0.8) {
        clock.ms += Math.floor(r() * 1500);
      } else if (op < 0.9) {
        await store.sweepNow();
      } else if (op < 0.95) {
        await store.close();
        store = await openStore(t, dir, { partitions: 2, now: clock.now, cacheBytes });
      } else {
        const ids = [...model.keys()];
        const got = await store.getMany(ids);
        ids.forEach((id, i) => {
          const m = model.get(id)!;
          const live = m.expiresAt > clock.ms;
          assert.equal(got[i] === null ? null : decoded(got[i])!.data, live ? m.data : null, `seed ${seed} step ${step}: ${id}`);
        });
      }
    }
    await store.close();
  }
});

test('concurrent puts (same cids), sweeps, remembers and reads agree with a model', async (t) => {
  for (let seed = 1; seed <= 8; seed++) {
    const dir = await tempDir(t);
    const clock = fakeClock();
    const r = rng(seed * 7919);
    let store: MessageStore = await openStore(t, dir, { partitions: 2, now: clock.now, cacheBytes: seed % 2 ? 1 << 20 : 4096 });
    const records = new Map<string, { data: number; expiresAt: number; cid?: string }>();
    const maxCounter = new Map<string, number>();
    let n = 0;
    for (let step = 0; step < 150; step++) {
      const ops: Promise<unknown>[] = [];
      const puts: { cid?: string; data: number; p: Promise<PutResult> }[] = [];
      const k = 1 + Math.floor(r() * 12);
      for (let i = 0; i < k; i++) {
        const cid = r() < 0.7 ? `c${Math.floor(r() * 6)}` : undefined;
        const data = n++;
        puts.push({ cid, data, p: store.put({ kind: 1, type: 't', data, to: ['u'], clientMsgId: cid, ttlMs: 300 + Math.floor(r() * 3000) }) });
        if (r() < 0.2) ops.push(store.sweepNow());
      }
      const now = clock.ms;
      const results = await Promise.all(puts.map((x) => x.p));
      await Promise.all(ops);
      // Within one step (one clock reading), one cid answers one id.
      const stepIds = new Map<string, string>();
      results.forEach((res, i) => {
        const { cid, data } = puts[i]!;
        if (cid !== undefined) {
          const prev = stepIds.get(cid);
          if (prev !== undefined) assert.equal(res.id, prev, `seed ${seed} step ${step}: cid ${cid} two ids in one step`);
          stepIds.set(cid, res.id);
        }
        if (!res.duplicate) {
          const part = res.id.slice(0, 2);
          assert.ok(counterOf(res.id) > (maxCounter.get(part) ?? 0), `seed ${seed}: counter reused ${res.id}`);
          maxCounter.set(part, counterOf(res.id));
          records.set(res.id, { data, expiresAt: res.message.expiresAt, cid });
        } else {
          const rec = records.get(res.id);
          assert.ok(rec !== undefined && rec.expiresAt > now, `seed ${seed} step ${step}: duplicate of ${res.id} which is expired or unknown`);
          assert.equal(res.message.data, rec.data);
        }
        if (r() < 0.5) store.remember(res);
      });
      if (r() < 0.4) clock.ms += Math.floor(r() * 800);
      if (r() < 0.05) {
        await store.close();
        store = await openStore(t, dir, { partitions: 2, now: clock.now, cacheBytes: seed % 2 ? 1 << 20 : 4096 });
      }
      if (r() < 0.3) {
        const ids = [...records.keys()];
        const got = await store.getMany(ids);
        ids.forEach((id, i) => {
          const m = records.get(id)!;
          assert.equal(got[i] === null ? null : decoded(got[i])!.data, m.expiresAt > clock.ms ? m.data : null, `seed ${seed} step ${step}: ${id}`);
        });
      }
    }
    await store.close();
  }
});
