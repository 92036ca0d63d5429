/**
 * A handshake whose presence add Redis applies but whose reply comes back past the
 * node's command timeout (Redis stalled, or the link slow, mid-handshake): the handshake
 * is answered 503, yet the add took the place of the device's open connection. Before,
 * nothing told that connection: its node never got the 4002 kick (the kick was sent on
 * the add's reply, which the node never read), and the handshake's own entry stayed as
 * an orphan until it expired. The device's retry replaced only the orphan, so the old
 * connection and the new one both delivered the user's messages until the old one's
 * presence refresh found itself replaced (up to PIXIU_HEARTBEAT, 25 s). Now the add
 * records what it replaced (presence-add-2.lua, `px:{uid}:replaced`), and the node
 * settles an add whose reply it did not read once Redis answers
 * (presence-settle-2.lua): it deletes the orphan and kicks the connections the add
 * replaced (docs/decisions.md, "A presence add whose reply is lost") — but for one
 * whose handshake came after the failed one: the device's retry, which the add
 * replaced by reaching Redis late (after the retry was admitted on another node), is
 * written back and stays open.
 *
 * Real Redis (a private redis-server), two in-process services on it: A reached
 * directly, B through a proxy (test/harness/lag-proxy.ts) that delays what Redis sends
 * to B's connection once it has carried a user's name — the add is the first command
 * of the handshake that names the user (it resumes with `last_seq`: no cursor read) —
 * or holds back what that connection sends (an add that reaches Redis late).
 * The old connection is on A (told over the bus) or on B itself (told in-process); and
 * the scripts' own rules are checked on Redis directly.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { LagProxy } from '../harness/lag-proxy.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { metricSample, openInbox, waitUntil } from '../harness/checks.js';
import { REPLACED_REASON } from '../../src/gateway/kicks.js';
import { PRESENCE_SCRIPTS } from '../../src/cluster/scripts.js';
import { evalScript, loadScripts } from '../../src/redis/scripts.js';
import { Keys } from '../../src/redis/keys.js';
import { expectRefused, startGateway, type GatewayFixture } from './gateway-fixture.js';

/** B's bound on one Redis command, ms. */
const B_COMMAND_TIMEOUT_MS = 300;
/** How late Redis's replies reach B while the add is answered, ms: past B's command timeout. */
const REPLY_LAG_MS = 1_500;
/** What every user of this file's node tests has in their name: B's connection that carries it is the one lagged. */
const LAGGED = 'reply-lost-';
const PREFIX = 'rl:';
const keys = new Keys(PREFIX);

const steps = cleanupList();
let proxy: LagProxy;
let a: GatewayFixture;
let b: GatewayFixture;
let probe: Redis;

before(async () => {
  const own = await RedisServer.start();
  steps.after(() => own.destroy());
  proxy = await LagProxy.start({ host: '127.0.0.1', port: own.port }, LAGGED);
  steps.after(() => proxy.close());
  const settings = { redisPrefix: PREFIX, storeDurability: 'relaxed' as const };
  // PIXIU_HEARTBEAT at its default (25 s): the old connection's own refresh, which
  // finds it replaced, comes long after the bound on its close below.
  a = await startGateway(steps, { ...settings, redisUrl: own.url });
  b = await startGateway(steps, { ...settings, redisUrl: proxy.url, redisCommandTimeoutMs: String(B_COMMAND_TIMEOUT_MS) });
  probe = (await openInbox(steps, own.url, PREFIX)).redis;
  loadScripts(probe, Object.values(PRESENCE_SCRIPTS));
});

after(() => steps.run());

for (const oldOn of ['A', 'B'] as const) {
  test(`a handshake on B whose presence add Redis applied but answered past the command timeout (503) still closes the device's connection it replaced, on ${oldOn} (4002), and leaves no orphan entry, well within a heartbeat`, async () => {
    const user = `${LAGGED}${oldOn}`;
    const connsKey = keys.conns(user);
    const { client: old, welcome } = await (oldOn === 'A' ? a : b).connectWelcomed(user, { device: 'phone' });

    proxy.lag(REPLY_LAG_MS);
    await expectRefused(b.connect(user, { device: 'phone', params: { last_seq: 0 } }), 503, 'UNAVAILABLE');
    proxy.lag(0);
    // Redis did apply the add: the old connection's entry is gone, and the add's record
    // names it. The handshake's own entry may be gone too, or not yet: B's settling, sent
    // as the handshake was answered, races this read (its reply is lagged, not its
    // command), and deletes that entry, never the record.
    const entries = await probe.hgetall(connsKey);
    assert.equal(entries[welcome.conn as string], undefined, 'the add replaced the old connection\'s entry');
    assert.ok(Object.keys(entries).length <= 1, JSON.stringify(entries));
    const records = Object.values(await probe.hgetall(keys.replaced(user))).map((r) => JSON.parse(r) as string[]);
    assert.ok(records.some((r) => r.includes(welcome.conn as string)), `the add recorded what it replaced: ${JSON.stringify(records)}`);

    assert.deepEqual(await old.waitClose(8_000), { code: 4002, reason: REPLACED_REASON },
      'before: not closed until its refresh found it replaced (up to PIXIU_HEARTBEAT, 25 s)');
    await waitUntil('the unanswered handshake\'s entry is gone', async () => (await probe.hlen(connsKey)) === 0);

    // The device's retry is its one connection.
    const { client: retry } = await b.connectWelcomed(user, { device: 'phone', params: { last_seq: 0 } });
    const listed = (await a.client.request('GET', `/v1/users/${user}/presence`)).body as { connections: unknown[] };
    assert.equal(listed.connections.length, 1, JSON.stringify(listed));
    await retry.close();
  });
}

/** Runs presence-add-2 for `conn` of `device` on node `node` of `user`; the entry lives `ttlMs`. */
function add(user: string, conn: string, device: string, now: number, node = 'n1', ttlMs = 60_000): Promise<unknown[]> {
  const k = keys.user(user);
  return evalScript<unknown[]>(probe, PRESENCE_SCRIPTS.add, [k.conns, k.replaced], [conn, `${now + ttlMs}|${node}|${device}|${now}`, device, String(now), '5', String(ttlMs)]);
}

/** Runs presence-settle-2 for the adds `[conn, since]` of `user` (entries live 60 s). */
function settleAdds(user: string, now: number, ...adds: [string, number][]): Promise<string[]> {
  const k = keys.user(user);
  return evalScript<string[]>(probe, PRESENCE_SCRIPTS.settle, [k.conns, k.replaced], [String(now), '60000', ...adds.flatMap(([c, since]) => [c, String(since)])]);
}

/** Runs presence-settle-2 for `conns` of `user`, each an add of {@link add}'s made at `now`. */
function settle(user: string, now: number, ...conns: string[]): Promise<string[]> {
  return settleAdds(user, now, ...conns.map((c): [string, number] => [c, now]));
}

test('settling an add answers what it replaced, again when asked again; keeps one whose entry is back; nothing for an add that never ran or one past its time; records past their time are pruned', async () => {
  const user = 'settled';
  const now = Date.now();
  await add(user, 'c0', 'phone', now, 'n0');
  const c0 = await probe.hget(keys.conns(user), 'c0');
  assert.deepEqual(await add(user, 'c1', 'phone', now), [1, 'c0', c0]);
  assert.deepEqual(await settle(user, now, 'c1'), ['c0', c0], 'c1 replaced c0');
  assert.deepEqual(await settle(user, now, 'c1'), ['c0', c0], 'the same again: a settling whose reply was lost is sent again');
  assert.equal(await probe.hexists(keys.conns(user), 'c1'), 0, 'the orphan entry is deleted');
  assert.deepEqual(await settle(user, now, 'never-ran'), []);

  // c2 replaces c3's entry, then c3's entry is back (its refresh found no entry of its device in its place).
  await add(user, 'c3', 'tablet', now, 'n0');
  const c3 = await probe.hget(keys.conns(user), 'c3') as string;
  await add(user, 'c2', 'tablet', now);
  await probe.hset(keys.conns(user), 'c3', c3);
  assert.deepEqual(await settle(user, now, 'c2'), [], 'c3 is the device\'s connection again');

  // Past the record's time (the entry's expiry): nothing; and the next add that replaces prunes it.
  assert.deepEqual(await settle(user, now + 60_001, 'c1'), []);
  await add(user, 'c4', 'watch', now + 60_001, 'n0');
  await add(user, 'c5', 'watch', now + 60_001);
  assert.deepEqual((await probe.hkeys(keys.user(user).replaced)).sort(), ['c5']);
  assert.ok((await probe.pttl(keys.user(user).replaced)) > 0, 'the record hash expires');
});

test('settling while the replaced key holds another type deletes the orphan entry and answers nothing (no add can have recorded there), rather than failing and being retried', async () => {
  const user = 'settled-wrong-type';
  const now = Date.now();
  await add(user, 'c1', 'phone', now);
  await probe.set(keys.replaced(user), 'x');
  assert.deepEqual(await settle(user, now, 'c1'), [], 'before: WRONGTYPE');
  assert.equal(await probe.hexists(keys.conns(user), 'c1'), 0);
});

test('settling an add that reached Redis after a newer handshake of its device was admitted writes that connection back, not answered, unless a live entry of the device stands; of several, the newest', async () => {
  const user = 'settled-late';
  const conns = keys.conns(user);
  const now = Date.now();
  // c1's add (its handshake at `now`) reaches Redis after the device's retry c2 (500 ms later) had replaced c0.
  await add(user, 'c0', 'phone', now - 10_000, 'n0');
  await add(user, 'c2', 'phone', now + 500, 'n0');
  const c2 = await probe.hget(conns, 'c2');
  assert.deepEqual(await add(user, 'c1', 'phone', now), [1, 'c2', c2], 'the late add replaced the retry');
  assert.deepEqual(await settleAdds(user, now + 600, ['c1', now]), [], 'c2 is newer than c1: not to be closed');
  assert.deepEqual(await probe.hgetall(conns), { c2 }, 'c2 is back, the orphan gone');
  assert.deepEqual(await settleAdds(user, now + 600, ['c1', now]), [], 'asked again (a reply lost): the same');
  assert.ok((await probe.pttl(conns)) > 0, 'the hash expires');

  // A live entry of the device stands (another retry, c3, replaced the orphan): c2 is answered, to be closed.
  const other = 'settled-late-2';
  await add(other, 'c2', 'tablet', now + 500, 'n0');
  const t2 = await probe.hget(keys.conns(other), 'c2');
  await add(other, 'c1', 'tablet', now);
  await add(other, 'c3', 'tablet', now + 900);
  assert.deepEqual(await settleAdds(other, now + 1000, ['c1', now]), ['c2', t2]);
  assert.deepEqual(Object.keys(await probe.hgetall(keys.conns(other))), ['c3']);

  // Two newer ones replaced at once: the newest is written back, the other answered; an
  // older one (c0, before the failed handshake) answered, as always.
  const two = 'settled-late-3';
  await add(two, 'c0', 'watch', now - 10_000, 'n0');
  const w0 = await probe.hget(keys.conns(two), 'c0');
  const [wa, wb] = [`${now + 60_000}|n0|watch|${now + 500}`, `${now + 60_000}|n2|watch|${now + 800}`];
  await probe.hset(keys.conns(two), 'ca', wa, 'cb', wb);
  await add(two, 'c1', 'watch', now);
  assert.deepEqual((await settleAdds(two, now + 1000, ['c1', now])).join(' '), `c0 ${w0} ca ${wa}`);
  assert.deepEqual(await probe.hgetall(keys.conns(two)), { cb: wb });
});

test('a handshake on B whose presence add reaches Redis only after the device\'s retry was admitted on A: the retry is not closed, and is the device\'s one connection', async () => {
  const user = `${LAGGED}late`;
  const connsKey = keys.conns(user);
  const { client: old } = await a.connectWelcomed(user, { device: 'phone' });

  // B's add (and all B sends after it) is held: B times out and answers 503.
  proxy.hold(true);
  try {
    await expectRefused(b.connect(user, { device: 'phone', params: { last_seq: 0 } }), 503, 'UNAVAILABLE');
    // The client's retry, on A: admitted, replacing the old connection.
    const { client: retry, welcome } = await a.connectWelcomed(user, { device: 'phone', params: { last_seq: 0 } });
    assert.equal((await old.waitClose(8_000)).code, 4002);
    proxy.hold(false);

    // B's add runs now, replacing the retry's entry; then B's settling, once answered.
    await waitUntil('B has settled its add', async () =>
      metricSample((await b.client.get('/metrics')).text, 'pixiu_presence_removals_pending') === 0, 8_000);
    const records = Object.values(await probe.hgetall(keys.replaced(user))).map((r) => JSON.parse(r) as string[]);
    assert.ok(records.some((r) => r.includes(welcome.conn as string)), `B's add replaced the retry: ${JSON.stringify(records)}`);
    assert.deepEqual(Object.keys(await probe.hgetall(connsKey)), [welcome.conn],
      'before: the retry\'s entry gone, and the retry closed 4002 (settle-1 answered it)');
    const [seq] = await a.post(user, 1);
    assert.equal((await retry.nextOf('msg')).seq, seq, 'the retry is open and delivers');
    const listed = (await a.client.request('GET', `/v1/users/${user}/presence`)).body as { connections: { conn: string }[] };
    assert.deepEqual(listed.connections.map((c) => c.conn), [welcome.conn]);
    await retry.close();
  } finally {
    proxy.hold(false);
  }
});
