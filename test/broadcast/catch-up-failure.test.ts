/**
 * A broadcast catch-up (`last_bseq`) whose read fails (Redis refuses or drops it) ends,
 * and live broadcasts still flow. What it could not read is told as a
 * `gap {stream: "broadcast"}` before the next `bcast` (docs/protocol.md, "Broadcasts").
 * Before, the retained broadcasts it could not read were skipped silently: the next
 * `bcast` was a live one past them, so the client's `last_bseq` moved over them and not
 * even a reconnect brought them back. A `last_bseq` at or past where the live feed
 * began missed nothing: it gets no gap.
 *
 * The node's warning of a failed catch-up is thinned across its connections like the
 * outage's other lines (src/log-throttle.ts: one per 10 s, with `notLogged`; docs/api.md
 * "Errors"), the others at debug. It was one warn line per connection: a soak finding
 * saw 25 in one second of Redis timeouts, and a node whose tens of thousands of clients
 * reconnect with `last_bseq` after a Redis blip would have logged one each.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { CATCH_UP_FAILED_LOG } from '../../src/gateway/catch-up-failure.js';
import { OUTAGE_LOG_INTERVAL_MS } from '../../src/log-throttle.js';
import { openInbox } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import type { Frame } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { postBroadcast, type Posted } from './broadcast-fixture.js';
import { compareStreamIds } from '../../src/streams/stream-id.js';

const cleanup = cleanupList();
let gw: GatewayFixture;
let admin: Redis;
let lines: LogLine[];

before(async () => {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const captured = capturingLogger();
  lines = captured.lines;
  gw = await startGateway(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed' }, captured.logger);
  admin = (await openInbox(cleanup, redis.url)).redis;
});

after(() => cleanup.run());

const SRC = new URL('../../src/', import.meta.url);

/**
 * Makes every call of one script fail, and of no other: drops every loaded script, loads
 * back all but `file` (relative to src/), and refuses EVAL, so its EVALSHA meets
 * NOSCRIPT and the EVAL it is sent again as is refused (src/redis/scripts.ts). Undone
 * by `ACL SETUSER default +eval`.
 */
async function refuseScript(file: string): Promise<void> {
  await admin.script('FLUSH');
  const others = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.lua') && f !== file);
  for (const other of others) await admin.script('LOAD', readFileSync(new URL(other, SRC), 'utf8'));
  await admin.acl('SETUSER', 'default', '-eval');
}

test('an up-to-date last_bseq whose bounds read fails gets no gap before the next live bcast', { timeout: 60_000 }, async (t) => {
  const posted: Posted[] = [];
  for (let i = 0; i < 3; i++) posted.push(await postBroadcast(gw.client, { data: { i } }));
  const newest = (posted.at(-1) as Posted).bseq;
  // The bounds script is refused while the client connects: not loaded, and EVAL refused.
  t.after(() => admin.acl('SETUSER', 'default', '+eval'));
  await refuseScript('streams/lua/stream-bounds-2.lua');
  const client = await gw.connect('carol', { params: { from: 'latest', last_bseq: newest } });
  const frames: Frame[] = [];
  for (;;) {
    const f = await client.next(10_000);
    frames.push(f);
    if (f.t === 'error' || f.t === 'welcome') break;
  }
  // Give the catch-up its failure.
  for (let i = 0; i < 20 && !frames.some((f) => f.t === 'error'); i++) {
    const f = await client.next(500).catch(() => undefined);
    if (f === undefined) break;
    frames.push(f);
  }
  await admin.acl('SETUSER', 'default', '+eval');
  const live = await postBroadcast(gw.client, { data: { live: true } });
  for (;;) {
    const f = await client.next(10_000);
    frames.push(f);
    if (f.bseq === live.bseq) break;
  }
  const gaps = frames.filter((f) => f.t === 'gap' && f.stream === 'broadcast');
  assert.deepEqual(gaps, [], `nothing after last_bseq ${newest} was missed; frames ${JSON.stringify(frames)}`);
});

test('a broadcast catch-up whose read fails tells the broadcasts it skipped as a gap before the next bcast', { timeout: 60_000 }, async (t) => {
  t.after(() => admin.acl('SETUSER', 'default', '+multi'));
  const posted: Posted[] = [];
  for (let i = 0; i < 5; i++) posted.push(await postBroadcast(gw.client, { data: { i } }));
  const lastSeen = (posted[0] as Posted).bseq;
  // The catch-up's page reads (MULTI … EXEC) are refused.
  await admin.acl('SETUSER', 'default', '-multi');
  const client = await gw.connect('bob', { params: { from: 'latest', last_bseq: lastSeen } });
  assert.equal((await client.next()).t, 'welcome');
  const frames: Frame[] = [];
  const first = await client.next(10_000);
  frames.push(first);
  await admin.acl('SETUSER', 'default', '+multi');
  const live = await postBroadcast(gw.client, { data: { live: true } });
  for (;;) {
    const f = await client.next(10_000);
    frames.push(f);
    if (f.bseq === live.bseq) break;
  }
  const shown = frames.map((f) => (f.t === 'bcast' ? `bcast ${f.bseq === live.bseq ? 'live' : f.bseq}` : f.t === 'gap' ? `gap ${f.from === lastSeen ? 'from last_bseq' : String(f.from)}` : `${f.t} ${String(f.code ?? '')}`));
  // Each retained broadcast after last_bseq is either sent or inside a broadcast gap told before the next bcast.
  const gaps = frames.filter((f) => f.t === 'gap' && f.stream === 'broadcast');
  const untold = posted.slice(1).filter((p) => !frames.some((f) => f.t === 'bcast' && f.bseq === p.bseq)
    && !gaps.some((g) => compareStreamIds(g.from as string, p.bseq) < 0 && compareStreamIds(p.bseq, g.to as string) < 0));
  assert.deepEqual(untold.map((p) => posted.indexOf(p)), [],
    `retained broadcasts after last_bseq neither sent nor told as a gap; frames: ${JSON.stringify(shown)}`);
});

/** Connections whose catch-up fails at once. */
const CLIENTS = 30;

test('many connections whose broadcast catch-up fails at once log one warning; the next, 10 s on, carries how many were left out', { timeout: 60_000 }, async (t) => {
  const first = await postBroadcast(gw.client, { data: { i: 0 } });
  for (let i = 1; i < 3; i++) await postBroadcast(gw.client, { data: { i } });
  // Past the thinning's window of any failure an earlier test made.
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() + OUTAGE_LOG_INTERVAL_MS });
  const from = lines.length;
  // The catch-up's page reads (MULTI … EXEC) are refused, as in an outage.
  t.after(() => admin.acl('SETUSER', 'default', '+multi'));
  await admin.acl('SETUSER', 'default', '-multi');
  const failCatchUp = async (user: string): Promise<void> => {
    const client = await gw.connect(user, { params: { from: 'latest', last_bseq: first.bseq } });
    // 30 s: thirty handshakes and catch-ups at once in this process; in a loaded
    // clean-clone CI run (2aa00767) one error frame took over 10 s (cause not found: the
    // file passes alone every run).
    assert.equal((await client.nextOf('error', 30_000)).code, 'UNAVAILABLE');
    await client.close();
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => failCatchUp(`reader-${i}`)));
  const of = (level: number): LogLine[] => lines.slice(from).filter((l) => l.msg === CATCH_UP_FAILED_LOG && l.level === level);
  assert.equal(of(40).length, 1, `one warning for ${CLIENTS} failed catch-ups: ${JSON.stringify(of(40))}`);
  // Its `notLogged` counts the lines earlier tests' failures left out (the throttle is the gateway's), so it is not checked.
  assert.equal(of(40)[0]?.code, 'UNAVAILABLE');
  assert.match(String(of(40)[0]?.user), /^reader-\d+$/);
  assert.equal(of(20).length, CLIENTS - 1, 'the others at debug');
  t.mock.timers.tick(OUTAGE_LOG_INTERVAL_MS);
  await failCatchUp('reader-late');
  assert.equal(of(40).length, 2);
  assert.equal(of(40)[1]?.user, 'reader-late');
  assert.equal(of(40)[1]?.notLogged, CLIENTS - 1);
});
