/**
 * A node whose clock is off from Redis's (walk31 F3): it says so, and what it stores
 * does not expire early for the other nodes' readers.
 *
 * One `pixiu serve` node on a private redis-server, its clock {@link SKEW_MS} behind
 * (test/harness/clock-offset.mjs, as test/cluster/client-id-skew.test.ts does; Redis runs
 * on this machine's true clock):
 * - at start it logs the warning of src/cluster/clock-skew.ts, and `/metrics` has
 *   `pixiu_clock_offset_seconds` (node minus Redis). Before, nothing was logged or exposed.
 * - a direct message's `expires_at` counts from Redis's clock (the later of it and the
 *   node's; src/store/record.ts), its `ts` from the node's. Before, it counted from the
 *   node's clock: a `ttl` 60 message was `expired` at once for readers on nodes with a
 *   true clock (history via another node: a gap), while this node served it.
 *
 * ClockSkewWatch's thinning and its "back in step" line: the unit tests below.
 */
import { before, after, test } from 'node:test';
import assert from 'node:assert/strict';
import { metricSample } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { CLI_MAIN, cleanupList, PixiuClient, spawnListening, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';
import { ClockSkewWatch, clockReading } from '../../src/cluster/clock-skew.js';
import { Metrics } from '../../src/api/metrics.js';
import { setTimeout as sleep } from 'node:timers/promises';

const TOKEN = 'clock-skew-watch-token-0123456789';
/** How far the node's clock runs behind Redis's, ms: ten minutes. */
const SKEW_MS = 600_000;

const files = cleanupList();
let node: PixiuClient;
let stdout: () => string;
let redisUrl: string;

before(async () => {
  const server = await RedisServer.start();
  files.after(() => server.destroy());
  redisUrl = server.url;
  const preload = new URL('../harness/clock-offset.mjs', import.meta.url).pathname;
  const started = await spawnListening(['--import', preload, CLI_MAIN, 'serve'], {
    PIXIU_REDIS_URL: server.url, PIXIU_DATA_DIR: await tempDataDir(files), PIXIU_PORT: '0', PIXIU_API_TOKEN: TOKEN,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed', CLOCK_OFFSET_MS: String(-SKEW_MS),
  }, files);
  node = new PixiuClient(started.url, TOKEN);
  stdout = started.stdout;
});

after(() => files.run());

/** Whether `seconds` is the skew, give or take 5 s. */
function aboutTheSkew(seconds: number | undefined): boolean {
  return seconds !== undefined && Math.abs(seconds + SKEW_MS / 1000) < 5;
}

test('a node whose clock is ten minutes behind Redis\'s warns at start and exposes the offset', { timeout: 60_000 }, async () => {
  const lines = stdout().split('\n').filter((l) => l.includes('Redis\'s: keep every node\'s clock and Redis\'s host\'s in step')).map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(lines.length, 1, 'one warning at start');
  assert.equal(lines[0]?.level, 40);
  assert.match(String(lines[0]?.msg), /^this node's clock is 600 s behind Redis's/);
  // The clock that is off may be Redis's host's: named, and said (review-clock R5).
  assert.equal(lines[0]?.redisUrl, redisUrl);
  assert.match(String(lines[0]?.msg), /if every node reports about the same offset, it is Redis's clock that is off/);
  assert.ok(aboutTheSkew(lines[0]?.offsetSeconds as number), `offsetSeconds ${String(lines[0]?.offsetSeconds)}`);
  const metrics = await node.request('GET', '/metrics');
  assert.ok(aboutTheSkew(metricSample(metrics.text, 'pixiu_clock_offset_seconds')), metrics.text.split('\n').find((l) => l.startsWith('pixiu_clock_offset')));
  const age = metricSample(metrics.text, 'pixiu_clock_offset_age_seconds');
  assert.ok(age !== undefined && age >= 0 && age < 30, `the reading is recent: ${String(age)} s old`);
});

test('a direct message stored by a node whose clock is behind expires a ttl after Redis\'s now, not its own', { timeout: 60_000 }, async () => {
  const sent = await node.post('/v1/messages', { to: 'skewed-u', type: 't', data: 1, ttl: 60 });
  assert.equal(sent.status, 201, sent.text);
  const read = await node.request('GET', `/v1/messages/${(sent.body as { id: string }).id}`);
  assert.equal(read.status, 200, read.text);
  const { ts, expires_at: expiresAt } = read.body as { ts: number; expires_at: number };
  const now = Date.now();
  assert.ok(Math.abs(expiresAt - (now + 60_000)) < 5000, `expires ${expiresAt - now} ms from now, not 60 s`);
  assert.ok(Math.abs(ts - (now - SKEW_MS)) < 5000, `ts is the node's clock (${ts - now} ms from now)`);
});

test('the watch warns once per spell out of step (thinned), says when back in step after three readings in step, and never for a slow answer alone', () => {
  const { logger, lines } = capturingLogger();
  const gauge: number[] = [];
  const watch = new ClockSkewWatch(logger, (s) => gauge.push(s));
  watch.observe(clockReading(1000, 1000, 1000, 2));
  watch.observe(clockReading(0, 0, 3000, 3000));
  assert.deepEqual(lines.length, 0, 'in step, and a 1.5 s offset within a 3 s round trip');
  watch.observe(clockReading(10_000, 5000, 10_000, 2));
  watch.observe(clockReading(10_000, 5000, 10_000, 2));
  assert.deepEqual(lines.map((l) => [l.level, l.msg?.split(':')[0], l.offsetSeconds]), [[40, 'this node\'s clock is 5 s ahead of Redis\'s', 5]], 'the second thinned');
  watch.observe(clockReading(5000, 5000, 5000, 2));
  watch.observe(clockReading(5000, 5000, 5000, 2));
  assert.equal(lines.length, 1, 'two readings in step are not yet back');
  watch.observe(clockReading(5000, 5000, 5000, 2));
  watch.observe(clockReading(0, 5000, 0, 2));
  assert.deepEqual(lines.slice(1).map((l) => [l.level, l.msg?.split(':')[0]]),
    [[30, 'this node\'s clock is back in step with Redis\'s'], [40, 'this node\'s clock is 5 s behind Redis\'s']], 'a new spell warns at once');
  assert.deepEqual(gauge, [0, 5, 5, 0, 0, 0, -5], 'not from the reading with a 1.5 s uncertainty');
});

test('an offset hovering around the bound warns once, not at each crossing (review-clock R3)', () => {
  for (const under of [900, 300]) {
    const { logger, lines } = capturingLogger();
    const watch = new ClockSkewWatch(logger, () => undefined);
    for (let i = 0; i < 12; i++) watch.observe(clockReading(i % 2 === 0 ? 1100 : under, 0, i % 2 === 0 ? 1100 : under, 2));
    assert.deepEqual(lines.map((l) => l.level), [40], `1.1 s and ${under} ms in turn: one warning, no "back in step"`);
  }
});

test('the warning is logged again at once, within its 10 minutes, when the offset moves by 60 s or more and changes sign or its size by over 2× (walk40 F6)', () => {
  const { logger, lines } = capturingLogger();
  const watch = new ClockSkewWatch(logger, () => undefined);
  /** A reading of the node `offsetS` seconds off Redis (negative: behind), a 2 ms round trip. */
  const off = (offsetS: number): void => watch.observe(clockReading(1e12, 1e12 - offsetS * 1000, 1e12, 2));
  off(-3600);
  off(-3600);
  off(-3000); // closer, not halved
  off(-7000); // under 2×
  off(-172_800); // Redis's clock stepped from +1 h to +2 d
  off(-172_790);
  off(1800); // the node's own clock stepped to 30 min ahead
  off(1800);
  off(20); // a node 20 s ahead of Redis: over 2× smaller by 1780 s
  off(50); // 2.5× larger but by 30 s: thinned
  off(-5); // the sign flipped, but by 25 s: thinned (readings jittering across zero log nothing more: reread2 F2)
  off(5);
  off(-5);
  off(-90); // the sign flipped by 110 s since the last line
  const heads = lines.map((l) => [l.level, l.msg?.split(':')[0], l.offsetSeconds, l.previousOffsetSeconds, l.notLogged]);
  assert.deepEqual(heads, [
    [40, 'this node\'s clock is 3600 s behind Redis\'s', -3600, undefined, undefined],
    [40, 'this node\'s clock is 172800 s behind Redis\'s', -172_800, -3600, 3],
    [40, 'this node\'s clock is 1800 s ahead of Redis\'s', 1800, -172_800, 1],
    [40, 'this node\'s clock is 20 s ahead of Redis\'s', 20, 1800, 1],
    [40, 'this node\'s clock is 90 s behind Redis\'s', -90, 20, 4],
  ]);
});

test('a slow TIME answer neither clears the warning of a node out of step nor moves the gauge (review-clock R3)', () => {
  const { logger, lines } = capturingLogger();
  const gauge: number[] = [];
  const watch = new ClockSkewWatch(logger, (s) => gauge.push(s));
  for (let i = 0; i < 12; i++) {
    // The node 5 s ahead; every third answer read by Redis at the end of a 10 s round trip: 0 ± 5 s.
    if (i % 3 === 2) watch.observe(clockReading(5000, 10_000, 15_000, 10_000));
    else watch.observe(clockReading(5000, 0, 5000, 2));
  }
  assert.deepEqual(lines.map((l) => l.level), [40], 'one warning, no false "back in step"');
  assert.ok(gauge.every((s) => s === 5), `gauge ${gauge.join(',')}`);
});

test('pixiu_clock_offset_age_seconds says how old the offset is: NaN before a reading, growing while none comes (review-clock R6)', async () => {
  const metrics = new Metrics();
  const sample = async (name: string): Promise<number | undefined> => metricSample(await metrics.registry.metrics(), name);
  assert.ok(Number.isNaN(await sample('pixiu_clock_offset_age_seconds')), 'no reading yet');
  metrics.setClockOffset(-2.5);
  assert.ok(((await sample('pixiu_clock_offset_age_seconds')) ?? -1) < 0.25, 'just read');
  // The age is a time: a fixed wait, with the bound below under it (0.29 s of 0.3 s).
  await sleep(300);
  assert.ok(((await sample('pixiu_clock_offset_age_seconds')) ?? -1) >= 0.29, 'no reading since: older');
  assert.equal(await sample('pixiu_clock_offset_seconds'), -2.5, 'the offset holds its last reading');
});
