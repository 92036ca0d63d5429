/**
 * What the broadcast tests share (DESIGN.md §6, §8): the secrets every test service
 * uses, posting a broadcast over the real HTTP API, and reading a client's broadcast
 * frames with every frame asserted — none is skipped, so a repeat, a stray or a frame
 * out of order fails the test.
 */
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { waitUntil } from '../harness/checks.js';
import { PixiuClient, spawnServe, tempDataDir, type CleanupContext, type ServeProcess } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import type { Frame, TestClient } from '../harness/ws-client.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';

/** The API token of every broadcast test service. */
export const API_TOKEN = 'broadcast-tests-api-token-0123456789';

/**
 * `pixiu serve` on `redisUrl` with its own data dir and port, the tests' API token and
 * JWT secret, the store's relaxed durability (these tests are about delivery), and
 * `env` on top; SIGKILLed at clean-up if still running.
 */
export async function serveBroadcasts(
  t: CleanupContext, redisUrl: string, env: Record<string, string> = {},
): Promise<{ serve: ServeProcess; api: PixiuClient }> {
  const serve = await spawnServe({
    PIXIU_REDIS_URL: redisUrl, PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_PORT: '0', PIXIU_API_TOKEN: API_TOKEN,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed', ...env,
  }, t);
  return { serve, api: new PixiuClient(serve.url, API_TOKEN) };
}

/** {@link serveBroadcasts} on a private redis-server of its own; `t` cleans up both. */
export async function serveBroadcastsAlone(t: CleanupContext, env: Record<string, string> = {}): Promise<{ serve: ServeProcess; api: PixiuClient }> {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  return serveBroadcasts(t, redis.url, env);
}

/** A broadcast as `POST /v1/broadcast` answered it. */
export interface Posted {
  readonly id: string;
  readonly bseq: string;
}

/** Posts a broadcast and asserts the 201 `{id, bseq}`. */
export async function postBroadcast(api: PixiuClient, body: Record<string, unknown>): Promise<Posted> {
  const answer = await api.post('/v1/broadcast', { type: 'test.news', data: { n: 0 }, ...body });
  assert.equal(answer.status, 201, answer.text);
  const posted = answer.body as Posted;
  assert.match(posted.id, /^[0-9a-f]{16}$/, answer.text);
  assert.match(posted.bseq, /^\d+-\d+$/, answer.text);
  return posted;
}

/** Counter of the ids {@link appendBroadcasts} gives (unique within a test process). */
let appended = 0;

/**
 * Appends `count` broadcasts to the `${prefix}broadcast` stream as POST /v1/broadcast
 * stores them (fields m, y, s, d: src/broadcast/broadcast-stream.ts), 100 to a MULTI,
 * instead of one request each: a node's reader reads them with XREAD and hands them to
 * its fan-out as it does posted ones. For tests about the feed, not the route (setting
 * up thousands of broadcasts). Resolves once the node's reader has read them all (it
 * waits in XREAD again: {@link readerBlocked}), so a connection made next finds them in
 * the history, not still coming live (a route that answers one at a time paced the
 * appends for the reader). Returns them in bseq order.
 */
export async function appendBroadcasts(redis: Redis, count: number, data: (i: number) => unknown, prefix = 'px:'): Promise<Posted[]> {
  const out: Posted[] = [];
  for (let i = 0; i < count; i += 100) {
    const m = redis.multi();
    const ids: string[] = [];
    for (let j = i; j < Math.min(count, i + 100); j++) {
      const id = encodeMsgId({ partition: 0, kind: MsgKind.broadcast, counter: ++appended });
      ids.push(id);
      m.xadd(`${prefix}broadcast`, '*', 'm', id, 'y', 'test.news', 's', String(Date.now()), 'd', JSON.stringify(data(j)));
    }
    const replies = (await m.exec()) ?? [];
    replies.forEach(([err, bseq], k) => {
      assert.equal(err, null);
      out.push({ id: ids[k] as string, bseq: bseq as string });
    });
  }
  await readerBlocked(redis);
  return out;
}

/** A broadcast as `POST /v1/broadcast` answered it, with a `client_msg_id` or not. */
export interface Answered extends Posted {
  /** True when the same `client_msg_id` was published before. */
  readonly duplicate: boolean;
}

/** The bseqs of the broadcast stream's entries (`px:broadcast`) of MsgID `id`. */
export async function entriesOf(redis: Redis, id: string): Promise<string[]> {
  const all = await redis.xrange('px:broadcast', '-', '+');
  return all.filter(([, fields]) => fields[fields.indexOf('m') + 1] === id).map(([bseq]) => bseq);
}

/**
 * Asserts `client`'s next broadcasts are exactly `bseqs` and then a marker broadcast
 * posted now: nothing came twice, nothing else came.
 */
export async function getsOnly(api: PixiuClient, client: TestClient, bseqs: readonly string[], timeoutMs?: number): Promise<void> {
  const marker = await postBroadcast(api, { type: 'test.marker', data: 'marker' });
  assert.deepEqual(await bcastsUntil(client, marker.bseq, timeoutMs), [...bseqs, marker.bseq]);
}

/** Reads the next frame and asserts it is a `bcast` (its `bseq` a string). */
export async function nextBcast(client: TestClient, timeoutMs?: number): Promise<Frame> {
  const f = await client.next(timeoutMs);
  assert.equal(f.t, 'bcast', `expected a bcast frame, got ${JSON.stringify(f)}`);
  assert.equal(typeof f.bseq, 'string', JSON.stringify(f));
  return f;
}

/**
 * Reads `bcast` frames until the one with bseq `marker` (included) and returns their
 * bseqs in arrival order. Any other frame fails.
 */
export async function bcastsUntil(client: TestClient, marker: string, timeoutMs?: number): Promise<string[]> {
  const seen: string[] = [];
  for (;;) {
    const f = await nextBcast(client, timeoutMs);
    seen.push(f.bseq as string);
    if (f.bseq === marker) return seen;
    assert.ok(seen.length <= 1000, `no marker ${marker} in ${seen.length} broadcasts`);
  }
}

/** Reads the next frame and asserts its type. */
export async function expectFrame(client: TestClient, t: string): Promise<Frame> {
  const f = await client.next();
  assert.equal(f.t, t, `expected a ${t} frame, got ${JSON.stringify(f)}`);
  return f;
}

/** Runs `fn` over `items` with at most `limit` at a time, in order of start. */
export async function inBatches<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T, i);
    }
  }));
  return out;
}

/** Resolves once the service's broadcast reader is blocked in XREAD (CLIENT LIST flag `b`). */
export async function readerBlocked(admin: Redis): Promise<void> {
  await waitUntil('the broadcast reader is blocked in XREAD', async () => {
    const list = await admin.client('LIST') as string;
    return list.split('\n').some((line) => /\bname=pixiu:broadcast:/.test(line) && /\bflags=\S*b/.test(line) && /\bcmd=xread\b/.test(line));
  });
}
