/**
 * The WebSocket side of `/metrics` (docs/api.md "Operations", an ops tester's F1):
 * `pixiu_acks_total{outcome}` counts every `ack` frame by what it did,
 * `pixiu_ack_cursor_writes_total{result}` the device cursors written to Redis, and
 * `pixiu_ws_handshakes_total{outcome}` every handshake on `/v1/connect`, accepted or
 * refused by its code, whatever refused it (the token, the Origin, the query's schema,
 * the route, the user's connection limit, Node's parser) — but never a HEAD, which is no
 * handshake. Each scraped before and after real traffic: exact deltas.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { metricSample, waitUntil } from '../harness/checks.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { rawRequest } from '../harness/raw-http.js';
import { RedisServer } from '../harness/redis-server.js';
import { JWT_KEY, expectPong, expectRefused, startGateway, type GatewayFixture } from './gateway-fixture.js';
import { testToken } from '../harness/ws-client.js';

let redis: RedisServer;
let gw: GatewayFixture;
const cleanup = cleanupList();

before(async () => {
  redis = await RedisServer.start();
  gw = await startGateway(cleanup, { redisUrl: redis.url, maxConnectionsPerUser: '1' });
});

after(async () => {
  await cleanup.run();
  await redis?.destroy();
});

/** Every sample of `name` by its one label's value. */
async function byLabel(name: string): Promise<Record<string, number>> {
  const text = (await gw.client.get('/metrics', { headers: { authorization: '' } })).text;
  return Object.fromEntries([...text.matchAll(new RegExp(`^${name}\\{\\w+="(\\w+)"\\} (\\d+)`, 'gm'))].map((m) => [m[1], Number(m[2])]));
}

/** `after` minus `before`, label by label, leaving out the labels that did not move. */
function deltas(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]).filter(([, d]) => d !== 0));
}

test('acks are counted by outcome (moved, idle, refused) and the cursors they move by their writes to Redis', async () => {
  const acks0 = await byLabel('pixiu_acks_total');
  const writes0 = await byLabel('pixiu_ack_cursor_writes_total');
  assert.deepEqual(Object.keys(acks0).sort(), ['idle', 'moved', 'refused'], 'every outcome from the start');
  assert.deepEqual(Object.keys(writes0).sort(), ['failed', 'written']);
  const { client } = await gw.connectWelcomed('acker', { device: 'd1' });
  const seqs = await gw.post('acker', 3);
  await client.msgs(3);
  client.ack(seqs[0] as number);
  // Written before the next ack, so that each move is one write (they are coalesced per round).
  await waitUntil('the first cursor is written', async () => ((await byLabel('pixiu_ack_cursor_writes_total')).written ?? 0) === (writes0.written ?? 0) + 1);
  client.ack(seqs[0] as number);
  client.ack(seqs[2] as number);
  client.ack((seqs[2] as number) + 50);
  assert.equal((await client.nextOf('error')).code, 'INVALID_REQUEST', 'an ack past the last seq sent is refused');
  await expectPong(client);
  await waitUntil('the second cursor is written', async () => ((await byLabel('pixiu_ack_cursor_writes_total')).written ?? 0) === (writes0.written ?? 0) + 2);
  assert.deepEqual(deltas(acks0, await byLabel('pixiu_acks_total')), { moved: 2, idle: 1, refused: 1 });
  assert.deepEqual(deltas(writes0, await byLabel('pixiu_ack_cursor_writes_total')), { written: 2 });
  await client.close();
});

test('handshakes are counted accepted, or refused by their code whatever refused them', async () => {
  const before = await byLabel('pixiu_ws_handshakes_total');
  assert.deepEqual(Object.keys(before).sort(), ['FORBIDDEN', 'INVALID_REQUEST', 'RATE_LIMITED', 'UNAUTHORIZED', 'UNAVAILABLE', 'abandoned', 'accepted', 'busy', 'full'], 'the closed set from the start');
  const one = await gw.connect('hs-a', { device: 'd1' });
  const two = await gw.connect('hs-b', { device: 'd1' });
  await expectRefused(gw.connect('hs-a', { device: 'd2' }), 429, 'RATE_LIMITED');
  await expectRefused(gw.connect('hs-c', { token: 'not-a-jwt' }), 401, 'UNAUTHORIZED');
  await expectRefused(gw.connect('hs-c', { token: await testToken(JWT_KEY, 'hs-c', { ttlSec: -60 }) }), 401, 'UNAUTHORIZED');
  await expectRefused(gw.connect('hs-c', { headers: { origin: 'https://elsewhere.example' } }), 403, 'FORBIDDEN');
  // The route's own check, then the query's schema.
  await expectRefused(gw.connect('hs-c', { params: { last_seq: 1, from: 'latest' } }), 400, 'INVALID_REQUEST');
  await expectRefused(gw.connect('hs-c', { params: { last_seq: 'x' } }), 400, 'INVALID_REQUEST');
  // A plain GET (no Upgrade) is a refused handshake too.
  const token = await testToken(JWT_KEY, 'hs-c');
  assert.equal((await gw.client.get('/v1/connect', { headers: { authorization: `Bearer ${token}` } })).status, 400);
  // A query that is not validly percent-encoded.
  const badQuery = await gw.client.get('/v1/connect?last_seq=%ZZ', { headers: { authorization: `Bearer ${token}` } });
  assert.match(badQuery.text, /percent-encoded/);
  assert.deepEqual(deltas(before, await byLabel('pixiu_ws_handshakes_total')), {
    accepted: 2, RATE_LIMITED: 1, UNAUTHORIZED: 2, FORBIDDEN: 1, INVALID_REQUEST: 4,
  });
  await Promise.all([one.close(), two.close()]);
});

/** The status of the answer to `request`, sent on a raw socket (`fetch` sends no Upgrade header). */
async function rawStatus(request: string): Promise<number> {
  return (await rawRequest(gw.url, request)).status;
}

test('a refused HEAD /v1/connect is no handshake, routed or not: it counts in pixiu_http_errors_total only', async () => {
  const handshakes0 = await byLabel('pixiu_ws_handshakes_total');
  const errors0 = await byLabel('pixiu_http_errors_total');
  const auth = `Authorization: Bearer ${await testToken(JWT_KEY, 'hs-head')}\r\n`;
  const upgrade = 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
  // Routed to the HEAD route fastify adds beside GET /v1/connect, which runs its checks: no token, then not an upgrade.
  assert.equal(await rawStatus('HEAD /v1/connect HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), 401);
  assert.equal(await rawStatus(`HEAD /v1/connect?device=d HTTP/1.1\r\nHost: x\r\n${auth}Connection: close\r\n\r\n`), 400);
  // With the upgrade headers (Node hands it to the upgrade event, which routes it the same way).
  assert.equal(await rawStatus(`HEAD /v1/connect HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`), 401);
  // Refused before routing (as a GET with it would be a refused handshake).
  assert.equal(await rawStatus('HEAD /v1/connect HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n\r\n'), 417);
  assert.deepEqual(deltas(handshakes0, await byLabel('pixiu_ws_handshakes_total')), {});
  assert.deepEqual(deltas(errors0, await byLabel('pixiu_http_errors_total')), { UNAUTHORIZED: 2, INVALID_REQUEST: 1, EXPECTATION_FAILED: 1 });
});

test('a HEAD /v1/connect with the upgrade headers and a good token is refused 400 before the handshake: the device\'s open socket stays', async () => {
  const { client } = await gw.connectWelcomed('hs-head2', { device: 'd' });
  const handshakes0 = await byLabel('pixiu_ws_handshakes_total');
  const auth = `Authorization: Bearer ${await testToken(JWT_KEY, 'hs-head2')}\r\n`;
  const upgrade = 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
  // It ran the whole handshake (a presence entry for device d) and replaced the open socket, 4002.
  const answer = await rawRequest(gw.url, `HEAD /v1/connect?device=d HTTP/1.1\r\nHost: x\r\n${auth}${upgrade}\r\n`, { waitMs: 3_000 });
  assert.equal(answer.status, 400);
  await expectPong(client);
  const [seq] = await gw.post('hs-head2', 1);
  assert.equal((await client.nextOf('msg')).seq, seq);
  assert.deepEqual(deltas(handshakes0, await byLabel('pixiu_ws_handshakes_total')), {});
});
