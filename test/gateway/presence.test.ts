/**
 * Presence and the client routes (DESIGN.md §4 `conns`, §7, §9): who is online, on
 * which device and node, as written on connect and removed on close; disconnecting a
 * user or one device; entries of dead nodes or past their own expiry never reported
 * (nor counted against the connection limit); and `/v1/me/...` with the user's JWT.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { expectError, openInbox, waitUntil } from '../harness/checks.js';
import { cleanupList, PixiuClient } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { testToken } from '../harness/ws-client.js';
import { JWT_KEY, expectPong, expectRefused, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { exactly } from './token-texts.js';
import type { ConnectionView as Conn } from '../../src/gateway/presence-routes.js';

let redis: RedisServer;
let gw: GatewayFixture;
let inbox: Inbox;
let raw: Redis;
const keys = new Keys('px:');
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  gw = await startGateway(cleanup, { redisUrl: redis.url });
  ({ inbox, redis: raw } = await openInbox(cleanup, redis.url));
});

after(async () => {
  // The private redis-server must die even when a clean-up step fails, or the run hangs.
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});


/** `GET /v1/users/{uid}/presence` on `on` (default: the file's service). */
async function presence(user: string, on: GatewayFixture = gw): Promise<{ user: string; online: boolean; connections: Conn[] }> {
  const answer = await on.client.get(`/v1/users/${user}/presence`);
  assert.equal(answer.status, 200, answer.text);
  return answer.body as { user: string; online: boolean; connections: Conn[] };
}

/** Posts a message to `user` and waits until a notify is published (to whichever node holds them). */
async function postAndPublishTo(user: string): Promise<void> {
  const publishes = async (): Promise<number> => Number(/cmdstat_publish:calls=(\d+)/.exec(await raw.info('commandstats'))?.[1] ?? 0);
  const before = await publishes();
  await gw.post(user);
  await waitUntil('the notify is published', async () => (await publishes()) > before);
}

/** Waits until presence lists exactly `count` connections of `user`. */
function presenceCount(user: string, count: number): Promise<void> {
  return waitUntil(`${user} has ${count} connections in presence`, async () => (await presence(user)).connections.length === count);
}

/** A presence entry written straight into Redis, as another node would. */
async function writeEntry(user: string, conn: string, entry: { node: string; device: string; expiresAt: number }): Promise<void> {
  await raw.hset(keys.conns(user), conn, `${entry.expiresAt}|${entry.node}|${entry.device}|${Date.now()}`);
}

describe('presence', () => {
  test('a connection shows with its device and node while open, and is gone after close', async () => {
    const before = Date.now();
    const { client, welcome } = await gw.connectWelcomed('pia', { device: 'phone' });
    const seen = await presence('pia');
    assert.equal(seen.user, 'pia');
    assert.equal(seen.online, true);
    assert.equal(seen.connections.length, 1);
    const [c] = seen.connections as [Conn];
    assert.equal(c.conn, welcome.conn);
    assert.equal(c.device, 'phone');
    assert.ok(c.since >= before - 1000 && c.since <= Date.now(), `since ${c.since}`);
    // The node is this service's registration in the node registry.
    const score = await raw.zscore(keys.nodes(), c.node);
    assert.ok(score !== null && Number(score) > Date.now(), `node ${c.node} is registered`);
    await client.close();
    await presenceCount('pia', 0);
    assert.deepEqual(await presence('pia'), { user: 'pia', online: false, connections: [] });
    assert.equal(await raw.hlen(keys.conns('pia')), 0, 'the entry is removed, not only hidden');
  });

  test('POST /v1/presence/query answers for several users at once, with the same connections as the single-user route', async () => {
    await gw.connectWelcomed('qa', { device: 'phone' });
    await gw.connectWelcomed('qa', { device: 'laptop' });
    await gw.connectWelcomed('qb', { device: 'tablet' });
    const answer = await gw.client.post('/v1/presence/query', { users: ['qa', 'qb', 'qc', 'qa'] });
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(answer.body, {
      users: {
        qa: { online: true, devices: ['laptop', 'phone'], connections: (await presence('qa')).connections },
        qb: { online: true, devices: ['tablet'], connections: (await presence('qb')).connections },
        qc: { online: false, devices: [], connections: [] },
      },
    });
    expectError(await gw.client.post('/v1/presence/query', { users: [] }), 400, 'INVALID_REQUEST');
    expectError(await gw.client.post('/v1/presence/query', { users: ['qa'] }, { headers: { authorization: '' } }), 401, 'UNAUTHORIZED');
  });

  test('users and devices named __proto__ or constructor get their own entries in presence answers and acked_by', async () => {
    await gw.connectWelcomed('__proto__', { device: 'phone' });
    const answer = await gw.client.post('/v1/presence/query', { users: ['__proto__', 'constructor', 'toString'] });
    assert.equal(answer.status, 200, answer.text);
    const users = (answer.body as { users: Record<string, { online: boolean; devices: string[] }> }).users;
    assert.deepEqual(Object.keys(users).sort(), ['__proto__', 'constructor', 'toString']);
    const entries = new Map(Object.entries(users));
    assert.equal(entries.get('__proto__')?.online, true, answer.text);
    assert.deepEqual(entries.get('__proto__')?.devices, ['phone']);
    assert.equal(entries.get('constructor')?.online, false);
    // Devices named so: the ack cursors, and the message report's acked_by.
    const posted = await gw.client.post('/v1/messages', { to: 'protodev', type: 'note', data: 1 });
    assert.equal(posted.status, 201, posted.text);
    const me = new PixiuClient(gw.url, await testToken(JWT_KEY, 'protodev'));
    for (const device of ['__proto__', 'constructor', 'web']) {
      assert.equal((await me.post('/v1/me/ack', { device, seq: 1 })).status, 200);
    }
    const cursors = await inbox.cursors('protodev');
    assert.deepEqual(Object.keys(cursors).sort(), ['__proto__', 'constructor', 'web']);
    assert.equal(cursors['__proto__'], 1);
    const report = await gw.client.get(`/v1/messages/${(posted.body as { id: string }).id}`);
    assert.equal(report.status, 200, report.text);
    assert.deepEqual((report.body as { recipients: unknown }).recipients, [{ user: 'protodev', seq: 1, acked_by: ['__proto__', 'constructor', 'web'] }]);
  });

  test('presence routes need the API token, not a user JWT', async () => {
    const asUser = new PixiuClient(gw.url, await testToken(JWT_KEY, 'pia'));
    expectError(await asUser.get('/v1/users/pia/presence'), 401, 'UNAUTHORIZED');
    expectError(await asUser.request('DELETE', '/v1/users/pia/connections'), 401, 'UNAUTHORIZED');
  });

  test('DELETE /v1/users/{uid}/connections?device= closes only that device; without it, every device', async () => {
    const { client: phone } = await gw.connectWelcomed('kia', { device: 'phone' });
    const { client: laptop } = await gw.connectWelcomed('kia', { device: 'laptop' });
    const { client: tablet } = await gw.connectWelcomed('kia', { device: 'tablet' });
    const { client: other } = await gw.connectWelcomed('kib', { device: 'phone' });

    const one = await gw.client.request('DELETE', '/v1/users/kia/connections?device=phone');
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body, { user: 'kia', closed: 1 });
    assert.equal((await phone.waitClose()).code, 1008);
    await expectPong(laptop);
    await expectPong(tablet);
    await presenceCount('kia', 2);

    const all = await gw.client.request('DELETE', '/v1/users/kia/connections');
    assert.deepEqual(all.body, { user: 'kia', closed: 2 });
    assert.equal((await laptop.waitClose()).code, 1008);
    assert.equal((await tablet.waitClose()).code, 1008);
    await presenceCount('kia', 0);
    await expectPong(other);

    const none = await gw.client.request('DELETE', '/v1/users/kia/connections');
    assert.deepEqual(none.body, { user: 'kia', closed: 0 });
    // Many HTTP clients send a JSON content type with no body: not a 400 on a route that takes none.
    for (const contentType of ['application/json', 'text/plain']) {
      const typed = await gw.client.request('DELETE', '/v1/users/kia/connections', { headers: { 'content-type': contentType } });
      assert.equal(typed.status, 200, `${contentType}: ${typed.text}`);
      assert.deepEqual(typed.body, { user: 'kia', closed: 0 });
    }
    expectError(await gw.client.request('DELETE', '/v1/users/kia/connections?device=a%20b'), 400, 'INVALID_REQUEST');
  });

  test('an entry of a node that is not registered, or whose registration expired, or past its own expiry, is not reported', async () => {
    const { welcome } = await gw.connectWelcomed('ghost', { device: 'phone' });
    const node = (await presence('ghost')).connections[0]?.node as string;
    const later = Date.now() + 60_000;
    await raw.zadd(keys.nodes(), String(Date.now() - 1000), 'lapsed-node');
    await writeEntry('ghost', 'c-unregistered', { node: 'never-registered', device: 'tablet', expiresAt: later });
    await writeEntry('ghost', 'c-lapsed', { node: 'lapsed-node', device: 'watch', expiresAt: later });
    // A second in the past: entries are judged by Redis's clock as the node last measured
    // it (NodeRegistry.now), which can trail this one by a round trip under load.
    await writeEntry('ghost', 'c-expired', { node, device: 'laptop', expiresAt: Date.now() - 1000 });
    const seen = await presence('ghost');
    assert.deepEqual(seen.connections.map((c) => c.conn), [welcome.conn]);
    const query = await gw.client.post('/v1/presence/query', { users: ['ghost'] });
    assert.deepEqual((query.body as { users: { ghost: { devices: string[] } } }).users.ghost.devices, ['phone']);
    assert.deepEqual(Object.keys(await raw.hgetall(keys.conns('ghost'))), [welcome.conn], 'the dead entries are pruned');
  });

  test('connections of a dead node do not count against the connection limit', async () => {
    const later = Date.now() + 60_000;
    for (let i = 1; i <= 5; i++) await writeEntry('crashed', `c${i}`, { node: 'crashed-node', device: `d${i}`, expiresAt: later });
    const { welcome } = await gw.connectWelcomed('crashed', { device: 'd6' });
    assert.equal(welcome.device, 'd6');
    assert.deepEqual((await presence('crashed')).connections.map((c) => c.device), ['d6']);
  });

  test('DELETE frees the slots of connections held by a node that never closes them (crashed, not yet lapsed)', async () => {
    // A node still registered (its registration has not lapsed) that will never act on
    // the kick: its 5 connections hold every slot of the user until DELETE frees them.
    const later = Date.now() + 60_000;
    await raw.zadd(keys.nodes(), String(later), 'frozen-node');
    for (let i = 1; i <= 5; i++) await writeEntry('stuck', `c${i}`, { node: 'frozen-node', device: `d${i}`, expiresAt: later });
    await expectRefused(gw.connect('stuck', { device: 'd6' }), 429, 'RATE_LIMITED');
    const one = await gw.client.request('DELETE', '/v1/users/stuck/connections?device=d1');
    assert.deepEqual(one.body, { user: 'stuck', closed: 1 });
    assert.deepEqual((await presence('stuck')).connections.map((c) => c.device), ['d2', 'd3', 'd4', 'd5']);
    const { welcome } = await gw.connectWelcomed('stuck', { device: 'd6' });
    assert.equal(welcome.device, 'd6');
    const all = await gw.client.request('DELETE', '/v1/users/stuck/connections');
    assert.deepEqual(all.body, { user: 'stuck', closed: 5 }, 'the four left and the local one');
    const again = await gw.client.request('DELETE', '/v1/users/stuck/connections');
    assert.deepEqual(again.body, { user: 'stuck', closed: 0 }, 'nothing is counted twice');
    await raw.zrem(keys.nodes(), 'frozen-node');
  });

  test('a notify no subscriber receives drops the presence of a node only once that node is no longer registered', async () => {
    // A registered node whose subscriber is away (reconnecting after a Redis restart):
    // its users keep their presence, so the next notifies reach it once it is back.
    const postAndPublish = (): Promise<void> => postAndPublishTo('hush');
    await raw.zadd(keys.nodes(), String(Date.now() + 60_000), 'quiet-node');
    await writeEntry('hush', 'c-quiet', { node: 'quiet-node', device: 'tv', expiresAt: Date.now() + 60_000 });
    await postAndPublish();
    await postAndPublish();
    assert.deepEqual(Object.keys(await raw.hgetall(keys.conns('hush'))), ['c-quiet'], 'kept: the node is registered');
    await raw.zrem(keys.nodes(), 'quiet-node');
    await postAndPublish();
    await waitUntil('the entry of the unregistered node is dropped', async () => Object.keys(await raw.hgetall(keys.conns('hush'))).length === 0);
  });

  test('a notify no subscriber receives drops the presence of a node whose registration lapsed, before any renewal has removed it', async () => {
    // Registered until a second ago: it missed its renewals (crashed), and no node has
    // renewed since to remove it. By Redis's clock it is gone.
    await raw.zadd(keys.nodes(), String(Date.now() - 1000), 'lapsed-quiet');
    await writeEntry('hush-lapsed', 'c-lapsed', { node: 'lapsed-quiet', device: 'tv', expiresAt: Date.now() + 60_000 });
    await postAndPublishTo('hush-lapsed');
    await waitUntil('the entry of the lapsed node is dropped', async () => Object.keys(await raw.hgetall(keys.conns('hush-lapsed'))).length === 0);
  });

  test('a node sees the connections of a node that started after it', async (t) => {
    const settings = { redisUrl: redis.url, redisPrefix: 'late:' };
    const early = await startGateway(t, settings);
    const late = await startGateway(t, settings);
    const { welcome } = await late.connectWelcomed('lena', { device: 'phone' });
    const seen = await presence('lena', early);
    assert.deepEqual(seen.connections.map((c) => c.conn), [welcome.conn]);
    assert.deepEqual((await presence('lena', late)).connections.map((c) => c.conn), [welcome.conn]);
    // And a kick from the early node reaches the connection on the late one.
    const kicked = await early.client.request('DELETE', '/v1/users/lena/connections');
    assert.deepEqual(kicked.body, { user: 'lena', closed: 1 });
  });
});

describe('/v1/me with the user JWT', () => {
  test('GET /v1/me/messages reads the caller\'s own inbox; no token or the API token is 401', async () => {
    await gw.post('mia', 3);
    await gw.post('mo', 1);
    const me = new PixiuClient(gw.url, await testToken(JWT_KEY, 'mia'));
    const page = await me.get('/v1/me/messages?after_seq=1&limit=10');
    assert.equal(page.status, 200, page.text);
    const body = page.body as { epoch: string; first_seq: number; latest_seq: number; messages: Array<{ seq: number; data: unknown }> };
    assert.equal(body.latest_seq, 3);
    assert.deepEqual(body.messages.map((m) => m.seq), [2, 3]);
    assert.deepEqual(body.messages.map((m) => m.data), [{ i: 1 }, { i: 2 }]);
    expectError(await me.get('/v1/me/messages', { headers: { authorization: '' } }), 401, 'UNAUTHORIZED');
    expectError(await gw.client.get('/v1/me/messages'), 401, 'UNAUTHORIZED');
    const expired = new PixiuClient(gw.url, await testToken(JWT_KEY, 'mia', { ttlSec: -5 }));
    // No WebSocket on these routes: the refusal says to mint a new token, nothing of refresh frames.
    const overHttp = /^token expired: its "exp" is [5-9] s behind this node's clock; mint a new token and send the request again with it \(docs\/protocol\.md "Client tokens"\)$/;
    expectError(await expired.get('/v1/me/messages'), 401, 'UNAUTHORIZED', overHttp);
    expectError(await expired.post('/v1/me/ack', { device: 'phone', seq: 1 }), 401, 'UNAUTHORIZED', overHttp);
    expectError(await me.get('/v1/me/messages?after_seq=-1'), 400, 'INVALID_REQUEST');
  });

  test('POST /v1/me/ack moves the device cursor, never back, and refuses a seq above the latest', async () => {
    await gw.post('max', 3);
    const me = new PixiuClient(gw.url, await testToken(JWT_KEY, 'max'));
    const ack = (device: string, seq: number): ReturnType<PixiuClient['post']> => me.post('/v1/me/ack', { device, seq });
    assert.deepEqual((await ack('web', 2)).body, { device: 'web', cursor: 2 });
    assert.deepEqual((await ack('web', 1)).body, { device: 'web', cursor: 2 }, 'a cursor never moves back');
    expectError(await ack('web', 4), 400, 'INVALID_REQUEST', /above the latest/);
    assert.deepEqual(await inbox.cursors('max'), { web: 2 });
    assert.deepEqual((await ack('web', 3)).body, { device: 'web', cursor: 3 });
    assert.deepEqual((await ack('tv', 1)).body, { device: 'tv', cursor: 1 });
    assert.deepEqual(await inbox.cursors('max'), { web: 3, tv: 1 });
    expectError(await ack('a b', 1), 400, 'INVALID_REQUEST');
    expectError(await me.post('/v1/me/ack', { device: 'web', seq: '3' }), 400, 'INVALID_REQUEST');
    expectError(await me.post('/v1/me/ack', { device: 'web', seq: 3 }, { headers: { authorization: '' } }), 401, 'UNAUTHORIZED');
    assert.deepEqual(await inbox.cursors('max'), { web: 3, tv: 1 });
    // Another user's token acks that user's cursors, never these.
    const other = new PixiuClient(gw.url, await testToken(JWT_KEY, 'mo'));
    expectError(await other.post('/v1/me/ack', { device: 'web', seq: 3 }), 400, 'INVALID_REQUEST');
    assert.deepEqual(await inbox.cursors('max'), { web: 3, tv: 1 });
  });

  test('POST /v1/me/ack with the epoch it read: acked under it; another epoch (the inbox was lost and made again, or one never its own) is a 409 that moves nothing and says no more than that', async () => {
    await gw.post('eve', 2);
    const me = new PixiuClient(gw.url, await testToken(JWT_KEY, 'eve'));
    const { epoch } = (await me.get('/v1/me/messages')).body as { epoch: string };
    assert.deepEqual((await me.post('/v1/me/ack', { device: 'web', seq: 1, epoch })).body, { device: 'web', cursor: 1 });
    // Redis lost the inbox; the next message makes a new one (a new epoch) at seq 1.
    const keys = new Keys('px:').user('eve');
    await raw.del(keys.inbox, keys.meta, keys.ids, keys.acks);
    await gw.post('eve', 2);
    const now = ((await me.get('/v1/me/messages')).body as { epoch: string }).epoch;
    assert.notEqual(now, epoch);
    // Says what is so, not why: the same answer for an epoch given up with nothing lost, or garbage.
    // The epoch given is quoted, escaped as text (the fidelity walk's F2: a lone surrogate
    // echoed as an escape made a body strict JSON decoders refuse).
    const conflict = (quoted: string): RegExp => new RegExp(`^epoch ${exactly(quoted).source.slice(1, -1)} is not the inbox's \\(${now}\\): read GET /v1/me/messages again$`);
    expectError(await me.post('/v1/me/ack', { device: 'web', seq: 2, epoch }), 409, 'CONFLICT', conflict(`"${epoch}"`));
    expectError(await me.post('/v1/me/ack', { device: 'web', seq: 2, epoch: 'nope' }), 409, 'CONFLICT', conflict('"nope"'));
    const lone = await me.post('/v1/me/ack', { device: 'web', seq: 2, epoch: 'x\ud800' });
    expectError(lone, 409, 'CONFLICT', conflict('"x\\ud800"'));
    assert.doesNotMatch(lone.text, /(?<!\\)\\ud800/i, `no lone-surrogate escape in the body a strict decoder reads: ${lone.text}`);
    assert.deepEqual(await inbox.cursors('eve'), {}, 'nothing acked in the new inbox');
    expectError(await me.post('/v1/me/ack', { device: 'web', seq: 1, epoch: '' }), 400, 'INVALID_REQUEST');
    // null (what the page says of a user with no inbox) is no epoch, as in a WebSocket ack.
    assert.deepEqual((await me.post('/v1/me/ack', { device: 'tab', seq: 1, epoch: null })).body, { device: 'tab', cursor: 1 });
    assert.deepEqual((await me.post('/v1/me/ack', { device: 'web', seq: 2, epoch: now })).body, { device: 'web', cursor: 2 });
  });

  test('a device that acked over HTTP resumes after its cursor on the socket', async () => {
    await gw.post('rex', 3);
    const me = new PixiuClient(gw.url, await testToken(JWT_KEY, 'rex'));
    assert.equal((await me.post('/v1/me/ack', { device: 'pad', seq: 2 })).status, 200);
    const { client, welcome } = await gw.connectWelcomed('rex', { device: 'pad' });
    assert.equal(welcome.resume_from, 3);
    const [msg] = await client.msgs(1);
    assert.equal(msg?.seq, 3);
  });
});
