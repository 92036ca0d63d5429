/**
 * `GET /v1/connect` before and around the upgrade (DESIGN.md §6, §10): every refusal is
 * an HTTP status with the JSON error body, before any WebSocket exists — bad, expired,
 * forged or missing tokens (401), Origins (403), the per-user connection limit across
 * nodes (429) and bad query parameters (400). Then what a token means for a live
 * connection: the same device replaces its old connection (4002), expiry closes 4001,
 * `refresh` extends it, and a far-future `exp` arms no overflowing timer.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type net from 'node:net';
import { Redis } from 'ioredis';
import { decodeJwt } from 'jose';
import { mintToken } from '../../src/auth/mint-token.js';
import { expectError, waitUntil } from '../harness/checks.js';
import { cleanupList, PixiuClient } from '../harness/pixiu-server.js';
import { monitorRedis } from '../harness/redis-monitor.js';
import { RedisServer } from '../harness/redis-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { signed } from './token-texts.js';
import { JWT_KEY, closesByCode, expectPong, expectRefused, serverSockets, startGateway, type GatewayFixture } from './gateway-fixture.js';

let redis: RedisServer;
let gw: GatewayFixture;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  gw = await startGateway(cleanup, { redisUrl: redis.url });
});

after(async () => {
  // The private redis-server must die even when a clean-up step fails, or the run hangs.
  try {
    await cleanup.run();
  } finally {
    await redis?.destroy();
  }
});

/** Base64url of a JSON value, as a JWT segment. */
function segment(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** `exp` of a token, ms since the epoch. */
function expiryMs(token: string): number {
  const { exp } = decodeJwt(token);
  assert.equal(typeof exp, 'number');
  return (exp as number) * 1000;
}

describe('tokens', () => {
  test('an expired token is refused with 401 before the upgrade, in the WebSocket\'s words (a refresh before exp)', async () => {
    const token = await testToken(JWT_KEY, 'ann', { ttlSec: -5 });
    await expectRefused(gw.connect('ann', { token }), 401, 'UNAUTHORIZED', /^token expired: its "exp" is [5-9] s behind this node's clock; mint a new token \(on an open WebSocket, send it in a "refresh" frame/);
  });

  test('a token signed with another key is refused with 401', async () => {
    const token = await testToken({ kind: 'secret', secret: 'another-hs256-secret-of-32-chars-or-more' }, 'ann');
    await expectRefused(gw.connect('ann', { token }), 401, 'UNAUTHORIZED', /invalid token/);
  });

  test('an unsigned token (alg none) is refused with 401', async () => {
    const exp = Math.floor(Date.now() / 1000) + 3600;
    const token = `${segment({ alg: 'none', typ: 'JWT' })}.${segment({ sub: 'ann', exp })}.`;
    await expectRefused(gw.connect('ann', { token }), 401, 'UNAUTHORIZED');
    await expectRefused(gw.connect('ann', { params: { token } }), 401, 'UNAUTHORIZED');
  });

  test('a missing token is refused with 401 naming both ways to send one; an empty ?token= is none', async () => {
    await expectRefused(TestClient.connect(gw.url), 401, 'UNAUTHORIZED', /Authorization: Bearer.*\?token=/);
    await expectRefused(TestClient.connect(gw.url, { params: { token: '' } }), 401, 'UNAUTHORIZED', /Authorization: Bearer.*\?token=/);
  });

  test('a token in ?token= is accepted', async () => {
    // With `params.token` the test client sends no Authorization header.
    const { client, welcome } = await gw.connectWelcomed('tokq', { device: 'web', params: { token: await testToken(JWT_KEY, 'tokq') } });
    assert.equal(welcome.user, 'tokq');
    assert.equal(welcome.device, 'web');
    await expectPong(client);
  });

  test('with a token in both the header and ?token=, the header is used and the query is not read', async () => {
    const good = await testToken(JWT_KEY, 'tokboth');
    const { welcome } = await gw.connectWelcomed('tokboth', { headers: { authorization: `Bearer ${good}` }, params: { token: 'not-a-jwt' } });
    assert.equal(welcome.user, 'tokboth');
    const empty = await gw.connectWelcomed('tokboth', { device: 'd2', headers: { authorization: `Bearer ${good}` }, params: { token: '' } });
    assert.equal(empty.welcome.user, 'tokboth');
    await expectRefused(TestClient.connect(gw.url, { headers: { authorization: 'Bearer not-a-jwt' }, params: { token: good } }), 401, 'UNAUTHORIZED');
  });
});

describe('Origin', () => {
  test('without PIXIU_ALLOWED_ORIGINS: another host is refused 403, the same host and no Origin are allowed', async () => {
    const host = new URL(gw.url).host;
    const port = Number(new URL(gw.url).port);
    for (const origin of ['https://evil.example', `http://127.0.0.1:${port + 1}`, `http://localhost:${port}`, 'null']) {
      await expectRefused(gw.connect('ori', { headers: { origin } }), 403, 'FORBIDDEN', /Origin/);
    }
    // The Origin is checked before the token: a stranger learns nothing more.
    await expectRefused(TestClient.connect(gw.url, { headers: { origin: 'https://evil.example' } }), 403, 'FORBIDDEN');
    const same = await gw.connect('ori', { device: 'browser', headers: { origin: `http://${host}` } });
    assert.equal((await same.next()).t, 'welcome');
    const none = await gw.connect('ori', { device: 'native' });
    assert.equal((await none.next()).t, 'welcome');
  });

  test('with PIXIU_ALLOWED_ORIGINS: only the listed origins are allowed; no Origin still is', async (t) => {
    const listed = await startGateway(t, { redisUrl: redis.url, allowedOrigins: 'https://app.example,https://admin.example' });
    const ownHost = `http://${new URL(listed.url).host}`;
    for (const origin of ['https://evil.example', 'http://app.example', ownHost]) {
      await expectRefused(listed.connect('ori2', { headers: { origin } }), 403, 'FORBIDDEN', /Origin/);
    }
    for (const [i, origin] of ['https://app.example', 'https://admin.example'].entries()) {
      const client = await listed.connect('ori2', { device: `d${i}`, headers: { origin } });
      assert.equal((await client.next()).t, 'welcome');
    }
    const none = await listed.connect('ori2', { device: 'native' });
    assert.equal((await none.next()).t, 'welcome');
  });
});

test('bad query parameters are refused with 400', async () => {
  const cases: Array<Record<string, string>> = [
    { last_seq: '-1' },
    { last_seq: 'abc' },
    { last_seq: '1.5' },
    // Only plain decimal digits: Number() would read these as 10, 5 and 3.
    { last_seq: '1e1' },
    { last_seq: '0x5' },
    { last_seq: ' 3' },
    { last_seq: '03' },
    { device: 'my phone' },
    { device: 'x'.repeat(65) },
    { from: 'oldest' },
    { last_seq: '3', from: 'latest' },
    { epoch: 'abc' },
    { unknown: '1' },
    // The shape of a bseq, but a part above 2^64 - 1: no stream id.
    { last_bseq: '99999999999999999999-0' },
    { last_bseq: '0-18446744073709551616' },
  ];
  for (const params of cases) {
    const message = await expectRefused(gw.connect('parm', { params }), 400, 'INVALID_REQUEST');
    assert.ok(message.length > 0, JSON.stringify(params));
    if (params.last_seq !== undefined && params.from === undefined) assert.match(message, /last_seq/, JSON.stringify(params));
    // Out of range or malformed, a last_bseq is told the same rule.
    // A value outside an enum is told the values, quoted as JSON (src/api/error-words.ts).
    if (params.from === 'oldest') assert.equal(message, 'querystring/from must be "latest"');
    if (params.last_bseq !== undefined) assert.match(message, /^querystring\/last_bseq must be a bseq as a bcast frame gives it: two whole numbers joined by - \(like 1718000000000-0\)/, message);
  }
  // A parameter given twice is refused as such, before the upgrade.
  const token = await testToken(JWT_KEY, 'parm');
  for (const name of ['device', 'last_seq']) {
    const answer = await upgradeAnswer(new URL(`/v1/connect?${name}=1&${name}=2`, gw.url), token);
    assert.equal(answer.status, 400, name);
    assert.deepEqual(JSON.parse(answer.body), { error: { code: 'INVALID_REQUEST', message: `querystring/${name} is given 2 times; give it once` } });
  }
  // The same user with good parameters connects: the refusals were about the parameters.
  const good = await gw.connect('parm', { params: { last_seq: '0', from: undefined } });
  assert.equal((await good.next()).t, 'welcome');
});

test('the 6th connection of a user is refused 429, counted across nodes through presence', async (t) => {
  // Two nodes on one Redis: the limit (5) holds for the user across both.
  const settings = { redisUrl: redis.url, redisPrefix: 'limit:' };
  const a = await startGateway(t, settings);
  const b = await startGateway(t, settings);
  const open = new Map<string, TestClient>();
  for (const [device, node] of [['d1', a], ['d2', a], ['d3', a], ['d4', b], ['d5', b]] as const) {
    const { client } = await node.connectWelcomed('lim', { device });
    open.set(device, client);
  }
  await expectRefused(a.connect('lim', { device: 'd6' }), 429, 'RATE_LIMITED', /5 connections/);
  await expectRefused(b.connect('lim', { device: 'd6' }), 429, 'RATE_LIMITED');
  // The same device again is a replacement, not one more: admitted on the other node,
  // and the old connection is closed 4002 across the bus.
  const { client: again } = await b.connectWelcomed('lim', { device: 'd1' });
  assert.equal((await open.get('d1')?.waitClose())?.code, 4002);
  await expectPong(again);
  await expectRefused(a.connect('lim', { device: 'd6' }), 429, 'RATE_LIMITED');
  // One closes: once presence has dropped it, there is room again.
  await open.get('d4')?.close();
  await waitUntil('presence drops the closed connection', async () => (await presenceOf('lim', a)).length === 4);
  const { welcome } = await a.connectWelcomed('lim', { device: 'd6' });
  assert.equal(welcome.device, 'd6');
});

/** Sends an upgrade request to `url` by hand; resolves with the HTTP status and body it is refused with. */
function upgradeAnswer(url: URL, token: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      headers: {
        authorization: `Bearer ${token}`, connection: 'Upgrade', upgrade: 'websocket',
        'sec-websocket-key': randomBytes(16).toString('base64'), 'sec-websocket-version': '13', ...headers,
      },
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error('upgraded'));
    });
    req.on('error', reject);
    req.end();
  });
}

test('a request that never becomes a WebSocket holds no place in presence', async () => {
  const token = await testToken(JWT_KEY, 'plain');
  // A plain GET is refused with the JSON error body, before presence is written.
  const asUser = new PixiuClient(gw.url, token);
  for (let i = 0; i < 6; i++) expectError(await asUser.get(`/v1/connect?device=d${i}`), 400, 'INVALID_REQUEST', /WebSocket/);
  // An upgrade refused for its handshake headers (an unknown version).
  assert.equal((await upgradeAnswer(new URL('/v1/connect?device=raw', gw.url), token, { 'sec-websocket-version': '99' })).status, 400);
  await waitUntil('no presence entry is left behind', async () => (await presenceOf('plain')).length === 0);
  // The user still has all five places.
  for (let i = 0; i < 5; i++) await gw.connectWelcomed('plain', { device: `w${i}` });
  assert.equal((await presenceOf('plain')).length, 5);
});

test('a client gone mid-upgrade, after its handshake checks passed and before its WebSocket opened, leaves no presence entry', async (t) => {
  const user = 'gone-mid';
  const sockets = serverSockets(gw);
  // Redis's own record of the commands the node sends: when the handshake's presence
  // entry was written, from outside the node.
  let added = false;
  await monitorRedis(redis.url, t, (args) => {
    if (/^eval/i.test(args[0] ?? '') && args.some((a) => a.endsWith(`{${user}}:conns`))) added = true;
  });
  const admin = new Redis(redis.url);
  try {
    const token = await testToken(JWT_KEY, user);
    // Writes to Redis wait: the handshake passes its checks — the client is still there
    // (abandoned-handshakes.ts), and with last_seq there is no cursor to read — and
    // waits on its presence write while the client goes away (a reset: the connection
    // is gone, not half-closed). The device has no other connection to replace, so the
    // handshake goes on.
    await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
    const req = http.request(new URL('/v1/connect?device=gone&last_seq=0', gw.url), {
      headers: {
        authorization: `Bearer ${token}`, connection: 'Upgrade', upgrade: 'websocket',
        'sec-websocket-key': randomBytes(16).toString('base64'), 'sec-websocket-version': '13',
      },
    });
    req.on('error', () => undefined);
    req.end();
    try {
      await waitUntil('the server has the upgrade request', async () => sockets.has('gone'), 5000, 5);
      await waitUntil('the presence write waits on the pause', async () =>
        /flags=\S*b\S* .*cmd=evalsha/.test(String(await admin.call('CLIENT', 'LIST'))), 5000, 5);
      (req.socket as net.Socket).resetAndDestroy();
      const serverSide = sockets.get('gone');
      await waitUntil('the server saw the client go', async () => serverSide?.destroyed === true, 5000, 5);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
    }
    // The handshake goes on: its entry is written …
    await waitUntil('the handshake wrote its presence entry', async () => added, 5000, 5);
    // … and removed again, since its socket is gone.
    await waitUntil('no presence entry is left behind', async () => (await presenceOf(user)).length === 0, 3000);
  } finally {
    admin.disconnect();
  }
});

/** The connections `GET /v1/users/{uid}/presence` lists. */
async function presenceOf(user: string, on: GatewayFixture = gw): Promise<unknown[]> {
  const answer = await on.client.get(`/v1/users/${user}/presence`);
  return (answer.body as { connections: unknown[] }).connections;
}

test('the same device connecting again replaces its old connection (4002); other devices are untouched', async () => {
  const { client: phone1 } = await gw.connectWelcomed('rep', { device: 'phone' });
  const { client: laptop } = await gw.connectWelcomed('rep', { device: 'laptop' });
  const { client: phone2, welcome } = await gw.connectWelcomed('rep', { device: 'phone' });
  const closed = await phone1.waitClose();
  assert.equal(closed.code, 4002);
  const [seq] = await gw.post('rep');
  for (const client of [phone2, laptop]) {
    const [msg] = await client.msgs(1, { ack: true });
    assert.equal(msg?.seq, seq);
  }
  await expectPong(laptop);
  assert.equal(phone1.frames.filter((f) => f.t === 'msg').length, 0, 'the replaced connection got nothing new');
  const presence = await gw.client.get('/v1/users/rep/presence');
  const conns = (presence.body as { connections: Array<{ conn: string; device: string }> }).connections;
  assert.deepEqual(conns.map((c) => c.device).sort(), ['laptop', 'phone']);
  assert.ok(conns.some((c) => c.conn === welcome.conn), 'the new phone connection is the one present');
});

test('handshakes of one device made at the same moment leave one connection: the others close 4002, and the limit holds', async () => {
  // All ten upgrades are under way at once: each one's presence write replaces the one
  // before it while that one's WebSocket is not open yet (pending-handshakes.ts).
  const token = await testToken(JWT_KEY, 'burst');
  const replacedCloses = async (): Promise<number> => (await closesByCode(gw))['4002'] ?? 0;
  const before = await replacedCloses();
  const clients = await Promise.all(Array.from({ length: 10 }, () => gw.connect('burst', { device: 'phone', token })));
  const codes: number[] = [];
  for (const c of clients) void c.closed.then(({ code }) => codes.push(code));
  await waitUntil('nine of the ten are closed', async () => codes.length === 9);
  assert.deepEqual(codes, Array.from({ length: 9 }, () => 4002));
  // Each counted once, whether it was replaced open or while its upgrade was under way.
  await waitUntil('nine 4002 closes counted', async () => (await replacedCloses()) - before === 9);
  const survivor = clients.find((c) => c.ws.readyState === c.ws.OPEN);
  assert.ok(survivor, 'one connection stays open');
  const [seq] = await gw.post('burst');
  const [msg] = await survivor.msgs(1, { ack: true });
  assert.equal(msg?.seq, seq);
  for (const c of clients) if (c !== survivor) assert.equal(c.frames.filter((f) => f.t === 'msg').length, 0, 'a replaced connection got a message');
  assert.equal((await presenceOf('burst')).length, 1);
  // The user holds one connection, so four more devices fit and a sixth connection does not.
  for (let i = 0; i < 4; i++) await gw.connectWelcomed('burst', { device: `more${i}`, token });
  await expectRefused(gw.connect('burst', { device: 'one-too-many', token }), 429, 'RATE_LIMITED');
});

// Each of these waits for a token's expiry: they run side by side.
describe('token lifetime on a live connection', { concurrency: true }, () => {
  test('a token expiring mid-connection closes it 4001 within a second of exp; a refresh for another user does not extend it', async () => {
    const token = await testToken(JWT_KEY, 'exp1', { ttlSec: 2 });
    const expMs = expiryMs(token);
    const { client } = await gw.connectWelcomed('exp1', { token });
    client.send({ t: 'refresh', token: await testToken(JWT_KEY, 'someone-else', { ttlSec: 3600 }) });
    const refused = await client.nextOf('error');
    assert.equal(refused.code, 'FORBIDDEN');
    assert.match(String(refused.message), /another user/);
    client.send({ t: 'refresh', token: 'not-a-jwt' });
    assert.equal((await client.nextOf('error')).code, 'UNAUTHORIZED');
    await expectPong(client);
    const { code } = await client.waitClose(5000);
    const closedAt = Date.now();
    assert.equal(code, 4001);
    assert.ok(closedAt >= expMs - 50 && closedAt <= expMs + 1000, `closed ${closedAt - expMs} ms after exp`);
  });

  test('a refresh with a new token for the same user extends the connection to the new exp', async () => {
    const token = await testToken(JWT_KEY, 'exp2', { ttlSec: 2 });
    const oldExpMs = expiryMs(token);
    const { client } = await gw.connectWelcomed('exp2', { token });
    const renewed = await testToken(JWT_KEY, 'exp2', { ttlSec: 4 });
    const newExpMs = expiryMs(renewed);
    assert.ok(newExpMs - oldExpMs >= 2000);
    client.send({ t: 'refresh', token: renewed });
    const { code } = await client.waitClose(8000);
    const closedAt = Date.now();
    assert.equal(code, 4001);
    assert.ok(closedAt >= newExpMs - 50, `closed ${newExpMs - closedAt} ms before the new exp (old exp ${oldExpMs - closedAt} ms ahead)`);
    assert.ok(closedAt <= newExpMs + 1000, `closed ${closedAt - newExpMs} ms after the new exp`);
    assert.equal(client.frames.filter((f) => f.t === 'error').length, 0, 'the refresh was accepted silently');
  });

  test('a far-future exp (100 years) arms no overflowing timer: the connection stays open and works', async () => {
    assert.deepEqual(await overflowWarningsOf(async () => {
      const token = await mintToken(JWT_KEY, { user: 'exp3', ttlSec: 100 * 365 * 86_400 });
      const { client } = await gw.connectWelcomed('exp3', { token });
      // A refresh re-arms the expiry with another far-future exp.
      client.send({ t: 'refresh', token: await mintToken(JWT_KEY, { user: 'exp3', ttlSec: 200 * 365 * 86_400 }) });
      await expectPong(client);
      const [seq] = await gw.post('exp3');
      const [msg] = await client.msgs(1, { ack: true });
      assert.equal(msg?.seq, seq);
      await expectPong(client);
      assert.equal(client.ws.readyState, client.ws.OPEN, 'still open');
    }), []);
  });

  test('an exp of 1e300 (a token that should not expire) connects and stays open; a refresh with 1e306 is taken silently, one with a nearer exp refused as shortening (docs/protocol.md "Client tokens")', async () => {
    assert.deepEqual(await overflowWarningsOf(async () => {
      const { client } = await gw.connectWelcomed('exp4', { token: signed('{"sub":"exp4","exp":1e300}') });
      client.send({ t: 'refresh', token: signed('{"sub":"exp4","exp":1e306}') });
      await expectPong(client);
      assert.deepEqual(client.frames.filter((f) => f.t === 'error'), [], 'the refresh was accepted silently');
      const [seq] = await gw.post('exp4');
      const [msg] = await client.msgs(1, { ack: true });
      assert.equal(msg?.seq, seq);
      client.send({ t: 'refresh', token: await testToken(JWT_KEY, 'exp4') });
      assert.deepEqual(await client.next(), { t: 'error', code: 'INVALID_REQUEST', message: 'the new token expires before the current one', ref: { t: 'refresh' } });
      await expectPong(client);
      assert.equal(client.ws.readyState, client.ws.OPEN, 'still open');
    }), []);
  });
});

/** Runs `body`; answers the messages of the TimeoutOverflowWarnings the process emitted meanwhile. */
async function overflowWarningsOf(body: () => Promise<void>): Promise<string[]> {
  const warnings: Error[] = [];
  const onWarning = (w: Error): void => {
    warnings.push(w);
  };
  process.on('warning', onWarning);
  try {
    await body();
  } finally {
    process.off('warning', onWarning);
  }
  return warnings.filter((w) => w.name === 'TimeoutOverflowWarning').map((w) => w.message);
}
