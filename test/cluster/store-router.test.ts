/**
 * Reads across nodes (DESIGN.md §9; src/cluster/store-router.ts), with a real local
 * store, a stubbed owner directory and a stand-in peer node on a real socket whose
 * answers each test chooses: records merged in the order asked, one request per owner,
 * and every way a read of another node can fail is UNAVAILABLE — never a null.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { isPixiuError, unavailable as makeUnavailable } from '../../src/errors.js';
import { MsgKind, decodeMsgId, encodeMsgId } from '../../src/ids/msg-id.js';
import { MessageStore } from '../../src/store/message-store.js';
import { StoreRouter, type PeerAuth } from '../../src/cluster/store-router.js';
import { isUnreadable } from '../../src/store/unreadable.js';
import { RECORDS_PATH } from '../../src/cluster/records-route.js';
import type { OwnerLookup, PartitionOwner } from '../../src/cluster/store-directory.js';
import type { Logger } from '../../src/logger.js';
import { capturingLogger } from '../harness/log-capture.js';
import { freePort } from '../harness/redis-server.js';
import { decoded, waitUntil } from '../harness/checks.js';

/** How the stand-in peer answers one request: status and body, or never. */
type PeerHandler = (ids: string[], auth: string | undefined) => { status: number; body: unknown } | 'hang';

let dir: string;
let local: MessageStore;
let peer: Server;
let peerUrl: string;
let handler: PeerHandler;
/** Requests the peer got: their ids. */
let requests: string[][] = [];
const hanging: ServerResponse[] = [];

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-router-'));
  local = await MessageStore.open({
    dir, partitions: 2, sync: false, cacheBytes: 0, defaultTtlMs: 60_000, maxMessageBytes: 65_536, sweepIntervalMs: 60_000,
  });
  peer = createServer((req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.on('data', (c: Buffer) => { text += c.toString(); });
    req.on('end', () => {
      assert.equal(req.url, RECORDS_PATH);
      const { ids } = JSON.parse(text) as { ids: string[] };
      requests.push(ids);
      const answer = handler(ids, req.headers.authorization);
      if (answer === 'hang') {
        hanging.push(res);
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
    });
  });
  peer.listen(0, '127.0.0.1');
  await once(peer, 'listening');
  peerUrl = `http://127.0.0.1:${(peer.address() as AddressInfo).port}`;
});

after(async () => {
  for (const res of hanging) res.destroy();
  peer.closeAllConnections();
  peer.close();
  await local.close();
  await rm(dir, { recursive: true, force: true });
});

/** A record as a peer store would send it. */
function remoteRecord(id: string, data: unknown): Record<string, unknown> {
  return { id, kind: 1, type: 'remote', data, to: ['u'], ts: 1, expiresAt: Date.now() + 60_000 };
}

/** A peer that answers store `store`'s records for every id, data = the id. */
function answering(store: string): PeerHandler {
  return (ids) => ({ status: 200, body: { store, records: ids.map((id) => (id.endsWith('dead') ? null : remoteRecord(id, id))) } });
}

/** An owner directory from a fixed table; records which stores were forgotten. */
function directory(table: Record<number, PartitionOwner>): OwnerLookup & { forgotten: string[] } {
  const forgotten: string[] = [];
  return {
    forgotten,
    owners: async (partitions) => new Map([...partitions].map((p) => [p, table[p] ?? { state: 'unclaimed' }])),
    forget: (s) => { forgotten.push(s); },
  };
}

const auth: PeerAuth = { header: 'Bearer s3cret', refresh: async () => false };

function router(owners: OwnerLookup, opts: { auth?: PeerAuth; timeoutMs?: number; cacheBytes?: number; logger?: Logger } = {}): StoreRouter {
  return new StoreRouter({
    local, owners, auth: opts.auth ?? auth, timeoutMs: opts.timeoutMs ?? 2000, cacheBytes: opts.cacheBytes ?? 1 << 20,
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
}

function id(partition: number, counter: number): string {
  return encodeMsgId({ partition, kind: MsgKind.user, counter });
}

const unavailable = (err: unknown): boolean => isPixiuError(err, 'UNAVAILABLE');

test('local and remote ids come back in the order asked, one request per owner; retired partitions and missing records are null', async () => {
  const mine = await local.put({ kind: MsgKind.user, type: 'local', data: 'here', to: ['u'] });
  const ownerA = { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'na' } } as const;
  const ownerB = { state: 'owned', storeId: 'B', lease: { url: `${peerUrl}/`, node: 'nb' } } as const;
  requests = [];
  handler = (ids, header) => {
    assert.equal(header, 'Bearer s3cret');
    return answering(ids[0]?.startsWith('10') ? 'B' : 'A')(ids, header);
  };
  const asked = [id(9, 1), mine.id, id(16, 7), id(9, 2), id(200, 1), 'not-an-id', id(1, 999), id(16, 8)];
  const got = await router(directory({ 9: ownerA, 16: ownerB, 200: { state: 'retired' }, 1: { state: 'retired' } })).getMany(asked);
  assert.deepEqual(got.map((r) => (r === null ? null : decoded(r).data)), [id(9, 1), 'here', id(16, 7), id(9, 2), null, null, null, id(16, 8)]);
  assert.equal(got[0]?.id, id(9, 1));
  assert.ok(Object.isFrozen(got[0]) && Object.isFrozen(decoded(got[0])?.to), 'remote records are frozen like local ones');
  assert.deepEqual(requests.map((r) => r.join()).sort(), [[id(9, 1), id(9, 2)].join(), [id(16, 7), id(16, 8)].join()]);
  // Only local ids: no owner lookup, no request.
  requests = [];
  assert.deepEqual((await router(directory({})).getMany([mine.id])).map((r) => decoded(r)?.data), ['here']);
  assert.equal(requests.length, 0);
});

test('more ids than one request may carry go in several requests to the same owner', async () => {
  requests = [];
  handler = answering('A');
  const ids = Array.from({ length: 2500 }, (_, i) => id(9, i + 1));
  const got = await router(directory({ 9: { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'n' } } })).getMany(ids);
  assert.deepEqual(got.map((r) => r?.id), ids);
  assert.deepEqual(requests.map((r) => r.length).sort((a, b) => a - b), [500, 1000, 1000]);
});

test('a partition no store claims now (Redis lost the claims) is UNAVAILABLE, not null: its records are not known to be gone', async () => {
  requests = [];
  const r = router(directory({}));
  await assert.rejects(r.getMany([id(9, 1)]), (err: unknown) => unavailable(err) && /partition 9 is claimed by no store now/.test((err as Error).message));
  // One id a caller asks for (GET /v1/messages/{id}) may be made up: not found.
  assert.equal(await r.get(id(9, 1)), null);
  assert.equal(requests.length, 0);
});

test('a claimed partition whose store has no lease is UNAVAILABLE, not null', async () => {
  requests = [];
  const r = router(directory({ 9: { state: 'owned', storeId: 'A', lease: undefined } }));
  await assert.rejects(r.getMany([id(9, 1)]), (err: unknown) => unavailable(err) && /store A, whose lease has lapsed \(its node stopped or could not renew it in time, or Redis's clock stepped forward\); retry later/.test((err as Error).message));
  await assert.rejects(r.get(id(9, 1)), unavailable);
  assert.equal(requests.length, 0);
});

test('an owner that cannot be reached, times out, refuses or answers for another store is UNAVAILABLE, and its lease is looked up again', async () => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  const lookup = directory({
    9: { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'n' } },
    20: { state: 'owned', storeId: 'Z', lease: { url: closed, node: 'gone' } },
  });
  const { logger, lines } = capturingLogger();
  const logged = router(lookup, { logger });
  await assert.rejects(logged.getMany([id(20, 1)]), unavailable);
  assert.deepEqual(lookup.forgotten, ['Z']);
  // The same outage again: not logged again (log-throttle.ts), one line for both.
  await assert.rejects(logged.getMany([id(20, 2)]), unavailable);
  assert.deepEqual(lines.filter((l) => l.msg === 'remote record read failed').map((l) => [l.level, l.store]), [[40, 'Z']]);

  handler = () => 'hang';
  const started = performance.now();
  await assert.rejects(router(lookup, { timeoutMs: 200 }).getMany([id(9, 1)]), unavailable);
  assert.ok(performance.now() - started < 2000, 'bounded by the timeout');

  for (const answer of [
    { status: 503, body: { error: { code: 'UNAVAILABLE', message: 'x' } } },
    { status: 400, body: { error: { code: 'INVALID_REQUEST', message: 'not of this store' } } },
    { status: 200, body: { store: 'other', records: [null] } },
    { status: 200, body: { store: 'A', records: [] } },
    { status: 200, body: { store: 'A', records: [remoteRecord(id(9, 2), 1)] } },
    { status: 200, body: 'garbage' },
  ]) {
    handler = () => answer;
    await assert.rejects(router(lookup).getMany([id(9, 1)]), unavailable, JSON.stringify(answer));
  }
  assert.ok(lookup.forgotten.filter((s) => s === 'A').length >= 7);
});

test('a 401 re-reads the cluster secret and tries once more', async () => {
  let secret = 'old';
  let refreshes = 0;
  const rotating: PeerAuth = {
    get header() { return `Bearer ${secret}`; },
    refresh: async () => {
      refreshes++;
      const changed = secret !== 'new';
      secret = 'new';
      return changed;
    },
  };
  handler = (ids, header) => (header === 'Bearer new' ? answering('A')(ids, header) : { status: 401, body: { error: { code: 'UNAUTHORIZED', message: 'no' } } });
  const lookup = directory({ 9: { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'n' } } });
  assert.equal((await router(lookup, { auth: rotating }).get(id(9, 5)))?.id, id(9, 5));
  assert.equal(refreshes, 1);
  // Still refused with the secret Redis holds: UNAVAILABLE, after one refresh.
  handler = () => ({ status: 401, body: { error: { code: 'UNAUTHORIZED', message: 'no' } } });
  await assert.rejects(router(lookup, { auth: rotating }).get(id(9, 5)), unavailable);
  assert.equal(refreshes, 2);
});

test('a remote record is read once per node: concurrent reads share one request, later ones hit the cache; failures are not kept', async () => {
  const lookup = directory({ 9: { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'n' } } });
  const r = router(lookup);
  requests = [];
  handler = answering('A');
  const [x, y, z] = await Promise.all([r.get(id(9, 40)), r.getMany([id(9, 41), id(9, 40)]), r.get(id(9, 40))]);
  assert.deepEqual([x?.id, y.map((m) => m?.id), z?.id], [id(9, 40), [id(9, 41), id(9, 40)], id(9, 40)]);
  assert.deepEqual(requests, [[id(9, 40)], [id(9, 41)]]);
  assert.equal((await r.get(id(9, 40)))?.id, id(9, 40));
  assert.equal(requests.length, 2, 'served from the cache');
  // A missing record is not cached: asked for again next time.
  requests = [];
  handler = (ids) => ({ status: 200, body: { store: 'A', records: ids.map(() => null) } });
  assert.equal(await r.get(id(9, 77)), null);
  assert.equal(await r.get(id(9, 77)), null);
  assert.equal(requests.length, 2);

  // A failing read fails every reader waiting on it, and is not remembered.
  requests = [];
  handler = () => ({ status: 503, body: { error: { code: 'UNAVAILABLE', message: 'x' } } });
  const both = await Promise.allSettled([r.get(id(9, 50)), r.get(id(9, 50))]);
  assert.deepEqual(both.map((s) => s.status === 'rejected' && unavailable(s.reason)), [true, true]);
  assert.equal(requests.length, 1);
  handler = answering('A');
  assert.equal((await r.get(id(9, 50)))?.id, id(9, 50));

  // Without a cache every read asks the owner.
  const uncached = router(lookup, { cacheBytes: 0 });
  requests = [];
  await uncached.get(id(9, 40));
  await uncached.get(id(9, 40));
  assert.equal(requests.length, 2);
});

test('cached records of a partition are dropped once another store, or the same store\'s node started again, holds it: an id read again names what that one stored', async () => {
  const table: Record<number, PartitionOwner> = { 9: { state: 'owned', storeId: 'B', lease: { url: peerUrl, node: 'nb' } } };
  const reader = router(directory(table));
  const asked = id(9, 1);
  let content = 'for victim only';
  requests = [];
  handler = (ids) => ({ status: 200, body: { store: (table[9] as { storeId: string }).storeId, records: ids.map((i) => remoteRecord(i, content)) } });
  assert.equal(decoded((await reader.getMany([asked]))[0])?.data, 'for victim only');
  assert.equal(decoded((await reader.getMany([asked]))[0])?.data, 'for victim only', 'from the cache');
  assert.equal(requests.length, 1);
  // B's node stopped: what was read of it is still served.
  table[9] = { state: 'owned', storeId: 'B', lease: undefined };
  assert.equal(decoded((await reader.getMany([asked]))[0])?.data, 'for victim only', 'a stopped owner keeps its cached records');
  assert.equal(requests.length, 1);
  // Redis lost the claims; a new data dir, store C, took the block and minted the same id.
  table[9] = { state: 'owned', storeId: 'C', lease: { url: peerUrl, node: 'nc' } };
  content = 'for user5';
  assert.equal(decoded((await reader.getMany([asked]))[0])?.data, 'for user5', 'C\'s message, not B\'s');
  assert.equal(requests.length, 2);
  // C's node starts again (a copy of it ran meanwhile and Redis lost its counters): read anew.
  table[9] = { state: 'owned', storeId: 'C', lease: { url: peerUrl, node: 'nc-2' } };
  content = 'after the restart';
  assert.equal(decoded((await reader.getMany([asked]))[0])?.data, 'after the restart');
  assert.equal(requests.length, 3);
  assert.equal(decoded((await reader.getMany([asked]))[0])?.data, 'after the restart', 'cached again');
  assert.equal(requests.length, 3);
});

test('while another store holds part of this node\'s block, its partitions Redis names as its own, or as no store\'s, are read from the local store, not over its advertised URL', async () => {
  const mine = await local.put({ kind: MsgKind.user, type: 'local', data: 'kept here', to: ['lost-block'] });
  const partition = decodeMsgId(mine.id).partition;
  const other = partition === 0 ? 1 : 0;
  // Its own URL does not lead back to it (no hairpin routing): only the local read works.
  requests = [];
  handler = () => ({ status: 503, body: { error: { code: 'UNAVAILABLE', message: 'not me' } } });
  const lost = (table: Record<number, PartitionOwner>): StoreRouter => new StoreRouter({
    local, owners: directory(table), auth, timeoutMs: 2000, cacheBytes: 1 << 20, localStoreId: 'me', blockLost: () => true,
  });
  const self = { state: 'owned', storeId: 'me', lease: { url: peerUrl, node: 'self' } } as const;
  const rival = { state: 'owned', storeId: 'R', lease: { url: peerUrl, node: 'nr' } } as const;
  assert.equal(decoded(await lost({ [partition]: self, [other]: rival }).get(mine.id))?.data, 'kept here');
  assert.equal(decoded(await lost({ [other]: rival }).get(mine.id))?.data, 'kept here', 'unclaimed now: no other store mints there');
  assert.equal(requests.length, 0);
  // The partition the rival holds is read from it: its ids may name its messages now.
  handler = answering('R');
  assert.equal(decoded((await lost({ [partition]: rival }).getMany([mine.id]))[0])?.data, mine.id);
  assert.equal(requests.length, 1);
});

test('an owner\'s unreadable mark, or an item of the right id that is no record, is the unreadable mark here; never cached; a record repaired at the owner reads as itself', async () => {
  const lookup = directory({ 9: { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'n' } } });
  const { logger, lines } = capturingLogger();
  const r = router(lookup, { logger });
  const [broken, shapeless, good] = [id(9, 60), id(9, 61), id(9, 62)];
  requests = [];
  handler = (ids) => ({
    status: 200,
    body: { store: 'A', records: ids.map((i) => (i === broken ? { id: i, unreadable: true } : i === shapeless ? { id: i, expiresAt: Date.now() + 60_000 } : remoteRecord(i, i))) },
  });
  const got = await r.getMany([broken, shapeless, good]);
  assert.deepEqual(got.map((g) => (isUnreadable(g) ? 'unreadable' : decoded(g)?.data)), ['unreadable', 'unreadable', good]);
  assert.equal(got[0]?.id, broken);
  // The owner logs its own; what this node could not decode itself is logged here, once.
  const logged = lines.filter((l) => l.level === 50 && typeof l.msg === 'string' && l.msg.startsWith('stored message cannot be decoded'));
  assert.deepEqual(logged.map((l) => l.msgId), [shapeless]);
  await r.getMany([shapeless]);
  assert.equal(lines.filter((l) => l.msgId === shapeless).length, 1, 'logged once');
  // Repaired at the owner: asked for again (not cached), and read as the record.
  handler = answering('A');
  requests = [];
  assert.deepEqual((await r.getMany([broken, good])).map((g) => decoded(g)?.data), [broken, good]);
  assert.deepEqual(requests, [[broken]], 'the good record was cached, the mark was not');
});

test('a retired partition reads as missing as soon as the directory says so, cached or being read: a record a read under way gets afterwards is not cached, not even for a lookup that fails', async () => {
  const table: Record<number, PartitionOwner> = { 9: { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'na' } } };
  const lookup = directory(table);
  let redisDown = false;
  const reader = router({ ...lookup, owners: async (ps) => { if (redisDown) throw makeUnavailable('redis down'); return lookup.owners(ps); } });
  const [first, second] = [id(9, 90), id(9, 91)];
  requests = [];
  handler = answering('A');
  assert.equal((await reader.get(first))?.id, first);
  // A's node stopped: what was read of it is still served, with no request.
  table[9] = { state: 'owned', storeId: 'A', lease: undefined };
  assert.equal((await reader.get(first))?.id, first);
  assert.equal(requests.length, 1);
  // A read of A is under way (its node back) when an operator retires the partition.
  table[9] = { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'na' } };
  handler = () => 'hang';
  const underWay = reader.get(second);
  await waitUntil('the read reaches the owner', async () => requests.length === 2);
  table[9] = { state: 'retired' };
  assert.deepEqual(await reader.getMany([first, second]), [null, null], 'missing, without waiting for the read under way');
  assert.equal(await reader.get(first), null);
  // The read under way answers now and caches what it read: still missing afterwards.
  const res = hanging.pop();
  assert.ok(res !== undefined);
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ store: 'A', records: [remoteRecord(second, 'late')] }));
  assert.equal((await underWay)?.id, second, 'the read begun before the retirement answers what it read');
  assert.deepEqual(await reader.getMany([second, first]), [null, null]);
  assert.equal(requests.length, 2, 'no request for a retired partition');
  // Redis down: the lookup fails and the cache is served as it is; it holds neither (review35 3).
  redisDown = true;
  await assert.rejects(reader.get(second), unavailable, 'the late record was not cached');
  await assert.rejects(reader.get(first), unavailable);
});

test('without a cache, a read that would join one under way since before the retirement reads as missing, not the owner\'s record', async () => {
  const table: Record<number, PartitionOwner> = { 9: { state: 'owned', storeId: 'A', lease: { url: peerUrl, node: 'na' } } };
  const reader = router(directory(table), { cacheBytes: 0 });
  const asked = id(9, 95);
  requests = [];
  handler = () => 'hang';
  const underWay = reader.get(asked);
  await waitUntil('the read reaches the owner', async () => requests.length === 1);
  table[9] = { state: 'retired' };
  const joining = reader.get(asked);
  const res = hanging.pop();
  assert.ok(res !== undefined);
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ store: 'A', records: [remoteRecord(asked, 'late')] }));
  assert.equal((await underWay)?.id, asked, 'the read begun before the retirement answers what it read');
  assert.equal(await joining, null, 'missing: the partition is retired');
  assert.equal(requests.length, 1);
});
