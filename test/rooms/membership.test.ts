/**
 * Room membership over HTTP (DESIGN.md §7, §8): `PUT` / `DELETE` / `GET
 * /v1/rooms/{room}/members`. Members are listed in join order, paged by a cursor that
 * neither skips nor repeats a member when others join or leave between pages; an
 * unknown room is 404; a room over the size cap is refused with a 400 that points to
 * channels, and nothing is added (all or none); every bad input is a 400 with the JSON
 * error body, and changes nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expectError } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { startInProcess, type InProcessServer, type PixiuClient } from '../harness/pixiu-server.js';
import { addMembers, deleteMembers, membersPath, postRoom, putMembers } from './room-fixture.js';

let server: InProcessServer;
/** A service with a room size cap of 10. */
let capped: InProcessServer;
const CAP = 10;

fileRedis(async ({ redis, cleanup }) => {
  server = await startInProcess(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisPrefix: 'm:' });
  capped = await startInProcess(cleanup, { redisUrl: redis.url, storeDurability: 'relaxed', redisPrefix: 'cap:', roomSizeCap: String(CAP) });
});

/** One page of `GET /v1/rooms/{room}/members`. */
interface Page {
  room: string;
  size: number;
  members: string[];
  next_cursor: string | null;
}

/** Reads one page and asserts it is a 200. */
async function page(client: PixiuClient, room: string, query = ''): Promise<Page> {
  const answer = await client.get(`${membersPath(room)}${query}`);
  assert.equal(answer.status, 200, answer.text);
  return answer.body as Page;
}

/** Every member, following `next_cursor` with pages of `limit`. */
async function allMembers(client: PixiuClient, room: string, limit: number): Promise<string[]> {
  const all: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const p: Page = await page(client, room, `?limit=${limit}${cursor !== null ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.ok(p.members.length <= limit, 'a page holds at most limit members');
    all.push(...p.members);
    if (p.next_cursor === null) return all;
    cursor = p.next_cursor;
  }
  return assert.fail('paging did not end');
}

test('GET members pages through in join order (calls in order, each call in the order named)', async () => {
  const room = 'ordered';
  // Reverse-alphabetical, in several quick calls: an order by name or by a clock that
  // ties within a millisecond would show.
  const calls = [['zed', 'yao', 'xia'], ['wu'], ['vic', 'uma'], ['tom'], ['sam', 'rob', 'quy', 'pat'], ['oz']];
  for (const users of calls) await addMembers(server.client, room, users);
  const joined = calls.flat();
  const first = await page(server.client, room);
  assert.deepEqual(first, { room, size: joined.length, members: joined, next_cursor: null }, 'default limit holds them all');
  for (const limit of [1, 2, 5]) assert.deepEqual(await allMembers(server.client, room, limit), joined, `limit ${limit}`);
  // A last page that ends exactly at the limit says so: no cursor to an empty page.
  const n = joined.length;
  assert.deepEqual(await page(server.client, room, `?limit=${n}`), { room, size: n, members: joined, next_cursor: null }, 'limit = member count');
  const half = await page(server.client, room, `?limit=${n / 2}`);
  assert.notEqual(half.next_cursor, null, 'half the members: another page follows');
  const last = await page(server.client, room, `?limit=${n / 2}&cursor=${encodeURIComponent(half.next_cursor ?? '')}`);
  assert.deepEqual(last, { room, size: n, members: joined.slice(n / 2), next_cursor: null }, 'the second half, exactly the limit, is the last');

  // Adding members already in keeps their place; only the new one goes last.
  await addMembers(server.client, room, ['xia', 'nia', 'zed'], 1);
  assert.deepEqual(await allMembers(server.client, room, 4), [...joined, 'nia']);
});

test('the cursor neither skips nor repeats members when others leave or join between pages', async () => {
  const room = 'moving';
  const users = Array.from({ length: 12 }, (_, i) => `mv${String(i).padStart(2, '0')}`);
  await addMembers(server.client, room, users);
  const p1 = await page(server.client, room, '?limit=4');
  assert.deepEqual(p1.members, users.slice(0, 4));
  assert.notEqual(p1.next_cursor, null);
  // Members of the first page leave, one of the next page leaves, a newcomer joins.
  await deleteMembers(server.client, room, ['mv00', 'mv01', 'mv05']);
  await addMembers(server.client, room, ['mv-new']);
  const rest: string[] = [];
  let cursor = p1.next_cursor;
  while (cursor !== null) {
    const p = await page(server.client, room, `?limit=4&cursor=${encodeURIComponent(cursor)}`);
    rest.push(...p.members);
    cursor = p.next_cursor;
  }
  assert.deepEqual(rest, [...users.slice(4).filter((u) => u !== 'mv05'), 'mv-new']);
});

test('a cursor past every member left of a room that still has members is an empty last page, not 404', async () => {
  const room = 'tail-left';
  await addMembers(server.client, room, ['t1', 't2']);
  const first = await page(server.client, room, '?limit=1');
  assert.notEqual(first.next_cursor, null);
  await deleteMembers(server.client, room, ['t2']);
  const rest = await page(server.client, room, `?limit=1&cursor=${encodeURIComponent(first.next_cursor ?? '')}`);
  assert.deepEqual(rest, { room, size: 1, members: [], next_cursor: null });
});

test('an unknown room is 404 for GET, DELETE and a room message; a room emptied by DELETE is unknown again', async () => {
  expectError(await server.client.get(membersPath('nowhere')), 404, 'NOT_FOUND', /no room nowhere/);
  expectError(await deleteMembers(server.client, 'nowhere', ['a']), 404, 'NOT_FOUND', /no room nowhere/);
  expectError(await server.client.post('/v1/messages', { room: 'nowhere', type: 't', data: 1 }), 404, 'NOT_FOUND', /no room nowhere/);

  await addMembers(server.client, 'brief', ['b1', 'b2']);
  const removed = await deleteMembers(server.client, 'brief', ['b1', 'b2']);
  assert.equal(removed.status, 200, removed.text);
  assert.deepEqual(removed.body, { room: 'brief', removed: 2, size: 0 });
  expectError(await server.client.get(membersPath('brief')), 404, 'NOT_FOUND');
  expectError(await server.client.post('/v1/messages', { room: 'brief', type: 't', data: 1 }), 404, 'NOT_FOUND');
});

test('PUT and DELETE answer what changed; repeats in one call count once', async () => {
  const add = await putMembers(server.client, 'counted', ['c1', 'c2', 'c1']);
  assert.equal(add.status, 200, add.text);
  assert.deepEqual(add.body, { room: 'counted', added: 2, size: 2 });
  const again = await putMembers(server.client, 'counted', ['c2', 'c3']);
  assert.deepEqual(again.body, { room: 'counted', added: 1, size: 3 });
  const del = await deleteMembers(server.client, 'counted', ['c1', 'c1', 'c9']);
  assert.deepEqual(del.body, { room: 'counted', removed: 1, size: 2 });
  // Only absent users, in a room that has members: nothing removed, not 404.
  const none = await deleteMembers(server.client, 'counted', ['c1', 'c9']);
  assert.equal(none.status, 200, none.text);
  assert.deepEqual(none.body, { room: 'counted', removed: 0, size: 2 });
});

test('GET members without a limit answers pages of 100', async () => {
  const users = Array.from({ length: 101 }, (_, i) => `d${String(i).padStart(3, '0')}`);
  await addMembers(server.client, 'defaulted', users);
  const first = await page(server.client, 'defaulted');
  assert.deepEqual([first.size, first.members, first.next_cursor !== null], [101, users.slice(0, 100), true]);
});

test('over the size cap, PUT is refused with a 400 naming channels, all or none', async () => {
  const room = 'small';
  const eight = Array.from({ length: 8 }, (_, i) => `s${i}`);
  await addMembers(capped.client, room, eight);

  const five = ['n1', 'n2', 'n3', 'n4', 'n5'];
  expectError(await putMembers(capped.client, room, five), 400, 'INVALID_REQUEST', /over the cap of 10.*channel/);
  assert.deepEqual(await allMembers(capped.client, room, 100), eight, 'nobody of the five was added');
  // Two of the five are already members: still three new ones, still over.
  expectError(await putMembers(capped.client, room, ['s0', 's1', 'n1', 'n2', 'n3']), 400, 'INVALID_REQUEST', /channel/);
  assert.equal((await page(capped.client, room)).size, 8);

  await addMembers(capped.client, room, ['n1', 'n2']);
  expectError(await putMembers(capped.client, room, ['n3']), 400, 'INVALID_REQUEST', /channel/);
  // At the cap, naming only members already in changes nothing and is fine.
  await addMembers(capped.client, room, ['s3', 'n2'], 0);
  assert.equal((await page(capped.client, room)).size, CAP);
  await postRoom(capped.client, { room }, { status: 201, recipients: CAP });

  // A first call larger than the cap creates nothing.
  const eleven = Array.from({ length: CAP + 1 }, (_, i) => `e${i}`);
  expectError(await putMembers(capped.client, 'too-big', eleven), 400, 'INVALID_REQUEST', /channel/);
  expectError(await capped.client.get(membersPath('too-big')), 404, 'NOT_FOUND');
});

test('bad membership input is 400 and changes nothing', async () => {
  const room = 'guarded';
  await addMembers(server.client, room, ['g1']);
  const c = server.client;
  const cases: Array<{ what: string; send: () => ReturnType<PixiuClient['get']>; message?: RegExp }> = [
    { what: 'an empty room id (PUT)', send: () => c.request('PUT', '/v1/rooms//members', { body: { users: ['g2'] } }), message: /room/ },
    { what: 'an empty room id (GET)', send: () => c.get('/v1/rooms//members'), message: /room/ },
    { what: 'an empty room id (DELETE)', send: () => c.request('DELETE', '/v1/rooms//members', { body: { users: ['g1'] } }), message: /room/ },
    { what: '20,000 users in one call', send: () => putMembers(c, room, Array.from({ length: 20_000 }, (_, i) => `big${i}`)), message: /users.*1000/ },
    { what: '1,001 users in one DELETE', send: () => deleteMembers(c, room, Array.from({ length: 1001 }, () => 'g1')), message: /users/ },
    { what: 'a room id with a space', send: () => putMembers(c, 'two words', ['g2']), message: /room/ },
    { what: 'a room id of 129 characters', send: () => putMembers(c, 'r'.repeat(129), ['g2']), message: /room/ },
    { what: 'an unknown body field', send: () => c.request('PUT', membersPath(room), { body: { users: ['g2'], role: 'admin' } }), message: /role/ },
    { what: 'no users', send: () => putMembers(c, room, []), message: /users/ },
    { what: 'users not an array', send: () => c.request('PUT', membersPath(room), { body: { users: 'g2' } }), message: /users/ },
    { what: 'a user id with a space', send: () => putMembers(c, room, ['g2', 'g 3']), message: /users\/1/ },
    { what: 'an empty user id', send: () => putMembers(c, room, ['']), message: /users\/0/ },
    { what: 'a limit of 0', send: () => c.get(`${membersPath(room)}?limit=0`), message: /limit/ },
    { what: 'a limit over 1000', send: () => c.get(`${membersPath(room)}?limit=1001`), message: /limit/ },
    { what: 'a malformed cursor', send: () => c.get(`${membersPath(room)}?cursor=abc`), message: /cursor/ },
    { what: 'an unknown query parameter', send: () => c.get(`${membersPath(room)}?offset=3`), message: /offset/ },
  ];
  for (const k of cases) {
    const answer = await k.send();
    try {
      expectError(answer, 400, 'INVALID_REQUEST', k.message);
    } catch (err) {
      assert.fail(`${k.what}: ${(err as Error).message}`);
    }
  }
  assert.deepEqual(await allMembers(server.client, room, 100), ['g1'], 'nothing was added or removed');
  expectError(await server.client.get(membersPath('two words')), 400, 'INVALID_REQUEST');
});

test('room messages with bad addressing are 400', async () => {
  await addMembers(server.client, 'addressed', ['ad1']);
  expectError(await server.client.post('/v1/messages', { room: '', type: 't', data: 1 }), 400, 'INVALID_REQUEST', /room/);
  expectError(await server.client.post('/v1/messages', { room: 'has space', type: 't', data: 1 }), 400, 'INVALID_REQUEST', /room/);
  expectError(await server.client.post('/v1/messages', { room: ['addressed'], type: 't', data: 1 }), 400, 'INVALID_REQUEST', /room/);
  expectError(await server.client.post('/v1/messages', { room: 'addressed', to: 'ad1', type: 't', data: 1 }), 400, 'INVALID_REQUEST', /both to and room/);
});
