/**
 * The time floor of the MsgID counters (src/store/time-floor.ts; DESIGN.md §2): the
 * rule (floor(now) × K, the larger of it and the counter, never back, nothing past the
 * headroom below 2^48), a store's counters raised by it (in memory, kept by the first
 * batch that mints, never lowered, never past 2^48 − 1), and the one log line of a start.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import { MAX_COUNTER } from '../../src/ids/msg-id.js';
import {
  TIME_FLOOR_HEADROOM, TIME_FLOOR_PER_MS, applyTimeFloor, flooredCounter, timeFloor,
} from '../../src/store/time-floor.js';
import { capturingLogger } from '../harness/log-capture.js';
import { counterOf, openStore, storeOptions, tempDir } from './fixtures/store-harness.js';
import { MessageStore } from '../../src/store/message-store.js';

/** Last ms whose floor is still applied. */
const LAST_MS = Math.floor((MAX_COUNTER - TIME_FLOOR_HEADROOM) / TIME_FLOOR_PER_MS);

test('the floor is floor(now ms) × 16; the counter is the larger of it and its own, never lower; no floor past the headroom below 2^48', () => {
  assert.equal(TIME_FLOOR_PER_MS, 16);
  assert.equal(timeFloor(1_800_000_000_000), 28_800_000_000_000);
  assert.equal(timeFloor(1_800_000_000_000.9), 28_800_000_000_000, 'whole ms');
  assert.equal(timeFloor(0), 0);
  assert.equal(timeFloor(-5), 0, 'a clock before the epoch is no floor');
  assert.equal(timeFloor(Number.NaN), undefined);
  assert.equal(timeFloor(Number.POSITIVE_INFINITY), undefined);
  // The arithmetic of the doc comment: 2^48 / 16 ms is some 557 years after 1970, the
  // last floor applied is in 2525, 2^40 counters below the top.
  assert.equal(new Date(2 ** 48 / TIME_FLOOR_PER_MS).getUTCFullYear(), 2527);
  assert.equal(new Date(LAST_MS).getUTCFullYear(), 2525);
  assert.equal(timeFloor(LAST_MS), LAST_MS * 16);
  assert.ok(LAST_MS * 16 <= MAX_COUNTER - TIME_FLOOR_HEADROOM && Number.isSafeInteger(LAST_MS * 16));
  assert.equal(timeFloor(LAST_MS + 1), undefined, 'a floor that would leave less than the headroom is not applied');
  assert.equal(timeFloor(8.64e15), undefined, 'the largest Date');
  // Today's floor leaves nearly all of the 48 bits.
  const today = timeFloor(Date.now()) ?? 0;
  assert.ok(today > 2 ** 44 && today < MAX_COUNTER / 8, String(today));

  assert.equal(flooredCounter(5, 100), 100, 'behind the floor: raised');
  assert.equal(flooredCounter(500, 100), 500, 'ahead of it (moved past Redis\'s record, a clock set back): kept');
  assert.equal(flooredCounter(100, 100), 100);
  assert.equal(flooredCounter(7, undefined), 7, 'no floor: as it is');
});

test('a store\'s counters are raised to the floor in memory, never lowered; the first put past it keeps it across a restart; never past 2^48 − 1', async (t) => {
  const dir = await tempDir(t);
  const first = await MessageStore.open(storeOptions(dir, { partitions: 2 }));
  const put = async (store: MessageStore): Promise<number> => counterOf((await store.put({ kind: 1, type: 't', data: 0, to: ['same'] })).id);
  // A store opened by itself counts from 1 (the floor is the serving node's).
  assert.equal(await put(first), 1);
  assert.equal(await put(first), 2);
  assert.equal(first.raiseCounters(1000), 2, 'both partitions raised');
  assert.equal(await put(first), 1001);
  assert.equal(first.raiseCounters(500), 0, 'a lower floor moves nothing back');
  assert.equal(await put(first), 1002);
  // Raised in memory only: nothing written until an id is minted.
  assert.deepEqual([...first.counters].sort((a, b) => a - b), [0, 1002]);
  await first.close();

  const again = await openStore(t, dir, { partitions: 2 });
  assert.deepEqual([...again.counters].sort((a, b) => a - b), [0, 1002], 'the minted partition kept its floor; the other minted nothing, so it has no id to protect');
  assert.equal(await put(again), 1003);
  assert.throws(() => again.raiseCounters(MAX_COUNTER + 1), RangeError);
  assert.throws(() => again.raiseCounters(1.5), RangeError);
  await assert.rejects(again.advanceCounters([MAX_COUNTER + 1, undefined]), RangeError, 'a high-water mark the next open would refuse is never written');
  assert.equal(again.raiseCounters(MAX_COUNTER), 2);
  await assert.rejects(put(again), (err: unknown) => isPixiuError(err) && err.code === 'UNAVAILABLE' && /used every message id/.test(err.message));
});

test('a start logs its floor once at info; a clock too far ahead applies none and says so at warn', async (t) => {
  const store = await openStore(t, await tempDir(t), { partitions: 4 });
  const { logger, lines } = capturingLogger();
  const now = 1_800_000_000_000;
  assert.equal(applyTimeFloor(store, now, logger), now * 16);
  const floorLines = lines.filter((l) => /time floor/.test(l.msg ?? ''));
  assert.equal(floorLines.length, 1, JSON.stringify(lines));
  assert.equal(floorLines[0]?.level, 30);
  assert.equal(floorLines[0]?.floor, now * 16);
  assert.equal(floorLines[0]?.raised, 4);
  assert.equal(floorLines[0]?.partitions, 4);
  assert.equal(counterOf((await store.put({ kind: 1, type: 't', data: 0, to: ['x'] })).id), now * 16 + 1);

  lines.length = 0;
  assert.equal(applyTimeFloor(store, (LAST_MS + 1000), logger), undefined);
  assert.deepEqual(lines.map((l) => l.level), [40]);
  assert.equal(counterOf((await store.put({ kind: 1, type: 't', data: 0, to: ['x'] })).id), now * 16 + 2, 'left as it was');
});
