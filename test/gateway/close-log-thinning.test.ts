/**
 * The info lines of the closes a client's own behaviour repeats — 4008 (ack timeout),
 * 4003 (protocol abuse) and the idle cut — are thinned node-wide (src/gateway/close-log.ts):
 * the first of each kind at info, then at most one per 10 s of that kind carrying
 * `notLogged`, the others at debug; the closes themselves are all counted. A soak tester's 45 non-acking
 * devices of 1,600 wrote 3,408 such lines in 30 minutes, every line of the log.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { metricSample, waitUntil, within } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { fileRedis } from '../harness/file-redis.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { IDLE_TERMINATED_LOG } from '../../src/gateway/close-log.js';

const INFO = 30;
const DEBUG = 20;
const CLOSED_LOG = 'connection closed by the server';

let gw: GatewayFixture;
let lines: LogLine[];

fileRedis(async ({ redis, cleanup }) => {
  const captured = capturingLogger();
  lines = captured.lines;
  gw = await startGateway(cleanup, {
    redisUrl: redis.url, storeDurability: 'relaxed', ackTimeoutMs: '200', redeliveryBackoffMs: '50,50', heartbeatMs: '100', idleTimeoutMs: '400',
  }, captured.logger);
});

/** `pixiu_ws_closes_total{code, by="server"}` of the node now. */
async function serverCloses(code: number): Promise<number> {
  return metricSample((await gw.client.get('/metrics')).text, `pixiu_ws_closes_total{code="${code}",by="server"}`) ?? 0;
}

test('three devices that never ack are each closed 4008 and counted; the first close is logged at info, the next two at debug', async () => {
  const users = ['never-acks-1', 'never-acks-2', 'never-acks-3'];
  const before = await serverCloses(4008);
  for (const user of users) await gw.post(user, 1);
  const clients = await Promise.all(users.map((user) => gw.connect(user, { device: 'phone' })));
  for (const client of clients) assert.equal((await client.waitClose(10_000)).code, 4008);
  await waitUntil('all three closes logged', async () => lines.filter((l) => l.msg === CLOSED_LOG).length === 3);
  const logged = lines.filter((l) => l.msg === CLOSED_LOG);
  assert.deepEqual(logged.map((l) => [l.level, l.code]), [[INFO, 4008], [DEBUG, 4008], [DEBUG, 4008]]);
  assert.deepEqual(new Set(logged.map((l) => l.user)), new Set(users), 'each line names its user');
  assert.equal(logged.some((l) => 'notLogged' in l), false, 'no line was left out before the first');
  assert.equal(await serverCloses(4008), before + 3);
});

test('a 4003 right after them is logged at info all the same: each kind of close is thinned on its own', async () => {
  const client = await gw.connect('abuser', { device: 'phone' });
  // Past the bad-frame limit (20 malformed frames): closed 4003 (docs/protocol.md).
  for (let i = 0; i < 25; i++) client.send('not json');
  assert.equal((await client.waitClose(10_000)).code, 4003);
  await waitUntil('the 4003 logged', async () => lines.some((l) => l.msg === CLOSED_LOG && l.code === 4003));
  assert.deepEqual(lines.filter((l) => l.msg === CLOSED_LOG && l.code === 4003).map((l) => l.level), [INFO]);
});

test('silent clients cut as idle: the first cut is logged at info, the next ones at debug', async () => {
  const sockets = await Promise.all(['silent-1', 'silent-2', 'silent-3'].map(async (user) => {
    // autoPong off: the server's pings go unanswered, so the node cuts it at the idle timeout.
    const ws = new WebSocket(new URL('/v1/connect', gw.url.replace(/^http/, 'ws')), {
      autoPong: false, headers: { authorization: `Bearer ${await testToken(JWT_KEY, user)}` },
    });
    ws.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
    return { ws, closed };
  }));
  await within(10_000, 'the idle cuts of the three silent clients (idle timeout 400 ms)', Promise.all(sockets.map((s) => s.closed)));
  await waitUntil('all three cuts logged', async () => lines.filter((l) => l.msg === IDLE_TERMINATED_LOG).length === 3);
  assert.deepEqual(lines.filter((l) => l.msg === IDLE_TERMINATED_LOG).map((l) => l.level), [INFO, DEBUG, DEBUG]);
});
