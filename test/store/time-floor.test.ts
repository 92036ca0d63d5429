/**
 * The time floor of the MsgID counters (src/store/time-floor.ts; DESIGN.md §2): the
 * rule (floor(now − 2025-01-01) × 64, the larger of it and the counter, never back,
 * nothing past the headroom below 2^48), a store's counters raised by it (in memory,
 * kept by the first batch that mints, never lowered, never past 2^48 − 1), and the log
 * lines of a start: the floor at info, counters left ahead of it at warn (how far, in
 * time, and where), an unusable clock at warn.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import { MAX_COUNTER } from '../../src/ids/msg-id.js';
import {
  TIME_FLOOR_EPOCH_MS, TIME_FLOOR_HEADROOM, TIME_FLOOR_PER_MS, applyTimeFloor, flooredCounter, timeFloor,
} from '../../src/store/time-floor.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { counterOf, openStore, storeOptions, tempDir } from './fixtures/store-harness.js';
import { MessageStore } from '../../src/store/message-store.js';

/** Last clock (ms since 1970) whose floor is still applied. */
const LAST_MS = TIME_FLOOR_EPOCH_MS + Math.floor((MAX_COUNTER - TIME_FLOOR_HEADROOM) / TIME_FLOOR_PER_MS);

test('the floor is floor(now ms − 2025-01-01) × 64; the counter is the larger of it and its own, never lower; no floor past the headroom below 2^48', () => {
  assert.equal(TIME_FLOOR_PER_MS, 64);
  assert.equal(new Date(TIME_FLOOR_EPOCH_MS).toISOString(), '2025-01-01T00:00:00.000Z');
  assert.equal(timeFloor(TIME_FLOOR_EPOCH_MS + 1000), 64_000);
  assert.equal(timeFloor(TIME_FLOOR_EPOCH_MS + 1000.9), 64_000, 'whole ms');
  assert.equal(timeFloor(1_800_000_000_000), (1_800_000_000_000 - 1_735_689_600_000) * 64);
  assert.equal(timeFloor(TIME_FLOOR_EPOCH_MS), 0);
  assert.equal(timeFloor(TIME_FLOOR_EPOCH_MS - 5), 0, 'a clock before the epoch is no floor');
  assert.equal(timeFloor(0), 0, 'nor one at 1970 (a dead real-time clock)');
  assert.equal(timeFloor(Number.NaN), undefined);
  assert.equal(timeFloor(Number.POSITIVE_INFINITY), undefined);
  // The arithmetic of the doc comment: 64,000 ids a second in one partition, above the
  // 22–39 k msg/s a whole node took in batch ingest (bench/README.md); 2^48 / 64 ms is
  // some 139 years after 2025, the last floor applied is in late 2163, 2^40 counters below the top.
  assert.equal(TIME_FLOOR_PER_MS * 1000, 64_000);
  assert.equal(Math.round(2 ** 48 / TIME_FLOOR_PER_MS / (365.25 * 86_400_000)), 139);
  assert.equal(new Date(TIME_FLOOR_EPOCH_MS + 2 ** 48 / TIME_FLOOR_PER_MS).getUTCFullYear(), 2164);
  assert.equal(new Date(LAST_MS).getUTCFullYear(), 2163);
  assert.equal(new Date(LAST_MS).getUTCMonth(), 9, 'October');
  assert.equal(timeFloor(LAST_MS), (LAST_MS - TIME_FLOOR_EPOCH_MS) * 64);
  assert.ok((LAST_MS - TIME_FLOOR_EPOCH_MS) * 64 <= MAX_COUNTER - TIME_FLOOR_HEADROOM && Number.isSafeInteger(LAST_MS * 64));
  assert.equal(timeFloor(LAST_MS + 1), undefined, 'a floor that would leave less than the headroom is not applied');
  assert.equal(timeFloor(8.64e15), undefined, 'the largest Date');
  // A floor of this decade leaves nearly all of the 48 bits (a fixed date: the real
  // clock's floor would pass any fixed bound some year, and the test fail with nothing wrong).
  const decade = timeFloor(Date.UTC(2030, 0, 1)) ?? 0;
  assert.ok(decade > 2 ** 40 && decade < MAX_COUNTER / 16, String(decade));
  assert.ok((timeFloor(Date.now()) ?? 0) > 0, 'today\'s clock gives a floor');

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

/** The start's log lines about the time floor (info and warn). */
const floorLines = (lines: LogLine[]): LogLine[] => lines.filter((l) => /time floor/.test(l.msg ?? ''));

test('a start logs its floor once at info, and no warning when every counter starts at the floor', async (t) => {
  const store = await openStore(t, await tempDir(t), { partitions: 4 });
  const { logger, lines } = capturingLogger();
  const now = 1_800_000_000_000;
  const floor = (now - TIME_FLOOR_EPOCH_MS) * 64;
  assert.equal(applyTimeFloor(store, now, logger), floor);
  const logged = floorLines(lines);
  assert.equal(logged.length, 1, JSON.stringify(lines));
  assert.equal(logged[0]?.level, 30);
  assert.equal(logged[0]?.msg, 'message-id counters start at least at the time floor (64 per ms since 2025-01-01): '
    + 'past every id of an earlier run that started at its floor and minted fewer than 64 a ms in a partition');
  assert.deepEqual([logged[0]?.floor, logged[0]?.perMs, logged[0]?.since, logged[0]?.raised, logged[0]?.partitions],
    [floor, 64, '2025-01-01T00:00:00.000Z', 4, 4]);
  assert.equal(counterOf((await store.put({ kind: 1, type: 't', data: 0, to: ['x'] })).id), floor + 1);
});

test('counters above the floor (a run faster than 64 a ms, a move past another store, a clock set back, a data dir of the earlier ×16 rule) are one warning: the largest lead in seconds and the partitions', async (t) => {
  const store = await openStore(t, await tempDir(t), { partitions: 4 });
  const { logger, lines } = capturingLogger();
  const now = 1_800_000_000_000;
  const floor = (now - TIME_FLOOR_EPOCH_MS) * 64;
  // Partition 1 is 90 s of floor ahead (plus one id), partition 2 30 s; 0 and 3 are behind.
  await store.advanceCounters([undefined, floor + 90_000 * 64 + 1, floor + 30_000 * 64, undefined]);
  assert.equal(applyTimeFloor(store, now, logger), floor);
  const logged = floorLines(lines);
  assert.deepEqual(logged.map((l) => l.level), [30, 40], JSON.stringify(lines));
  assert.equal(logged[0]?.raised, 2);
  const warning = logged[1];
  assert.deepEqual([warning?.aheadSeconds, warning?.partitions, warning?.floorPassesAt], [91, [1, 2], new Date(now + 90_001).toISOString()]);
  assert.match(warning?.msg ?? '', /^message-id counters are ahead of the time floor \(an earlier run minted faster than 64 ids a ms since its start, moved past another store's ids, or the clock was set back\): /);
  assert.match(warning?.msg ?? '', /a data dir restored from a backup and started less than aheadSeconds after this node's last id may mint again ids minted after that backup; wait that long before starting a restored copy$/);
  // The info line claims nothing the warning takes back.
  assert.doesNotMatch(logged[0]?.msg ?? '', /never/);

  // A clock set back a minute: every partition is ahead now, by a minute or more.
  lines.length = 0;
  assert.equal(applyTimeFloor(store, now - 60_000, logger), floor - 60_000 * 64);
  assert.deepEqual(floorLines(lines).map((l) => [l.level, l.aheadSeconds, l.partitions]), [[30, undefined, 4], [40, 151, [0, 1, 2, 3]]]);

  // A data dir of this rule's first form (clock ms × 16 since 1970) is years ahead: the warning says so; nothing else changes.
  const old = await openStore(t, await tempDir(t), { partitions: 2 });
  await old.advanceCounters([now * 16, undefined]);
  lines.length = 0;
  applyTimeFloor(old, now, logger);
  const years = (floorLines(lines)[1]?.aheadSeconds as number) / (365.25 * 86_400);
  assert.ok(years > 12 && years < 13, String(years));
  assert.deepEqual(old.assignedCounters, [now * 16, floor], 'it mints on from where it is; the other partition from the floor');
});

test('a clock too far ahead applies no floor and says so at warn; a clock that is no number says that', async (t) => {
  const store = await openStore(t, await tempDir(t), { partitions: 4 });
  const { logger, lines } = capturingLogger();
  assert.equal(applyTimeFloor(store, LAST_MS + 1000, logger), undefined);
  assert.deepEqual(lines.map((l) => l.level), [40]);
  assert.match(lines[0]?.msg ?? '', /^the clock reads too far ahead for a message-id time floor \(past October 2163\): not applied; /);
  assert.equal(counterOf((await store.put({ kind: 1, type: 't', data: 0, to: ['x'] })).id), 1, 'left as it was');

  lines.length = 0;
  assert.equal(applyTimeFloor(store, Number.NaN, logger), undefined);
  assert.deepEqual(lines.map((l) => [l.level, l.clock]), [[40, 'NaN']]);
  assert.match(lines[0]?.msg ?? '', /^the clock reads no number \(Date\.now\(\) is not finite\): no message-id time floor applied; /);
  assert.doesNotMatch(lines[0]?.msg ?? '', /too far ahead/);
});
