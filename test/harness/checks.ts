/**
 * Checks shared by the API and service tests: the JSON error body of DESIGN.md §7,
 * a whole inbox read through the `Inbox` class, a bounded wait on a condition
 * that has no event to wait on (a node that stopped listening among them), a command a
 * named Redis connection holds on a CLIENT PAUSE, one sample of `/metrics`, and a count
 * of a Redis client's socket writes.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { EventEmitter } from 'node:events';
import type { FastifyReply } from 'fastify';
import type { HistoryBudget } from '../../src/api/history-budget.js';
import { Inbox, type PageEntry } from '../../src/inbox/inbox.js';
import { createRedis } from '../../src/redis/client.js';
import { decodeMsgId } from '../../src/ids/msg-id.js';
import { timeFloor } from '../../src/store/time-floor.js';
import { isUnreadable, type ReadRecord, type UnreadableRecord } from '../../src/store/unreadable.js';
import type { CleanupContext, HttpAnswer, InProcessServer } from './pixiu-server.js';

/**
 * Asserts that `answer` is exactly `{"error": {"code", "message"}}` with `status` and
 * `code`, JSON, and without a stack trace.
 * @param message when given, the error message must match it
 * @returns the message
 */
export function expectError(answer: HttpAnswer, status: number, code: string, message?: RegExp): string {
  assert.equal(answer.status, status, `status of ${answer.text}`);
  assert.match(answer.headers.get('content-type') ?? '', /^application\/json/);
  const body = answer.body as { error?: { code?: unknown; message?: unknown } } | undefined;
  assert.ok(body !== undefined && typeof body === 'object', `a JSON body: ${answer.text}`);
  assert.deepEqual(Object.keys(body), ['error'], answer.text);
  assert.ok(body.error !== undefined && typeof body.error === 'object', answer.text);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message'], answer.text);
  assert.equal(body.error.code, code, answer.text);
  assert.equal(typeof body.error.message, 'string');
  const text = body.error.message as string;
  assert.doesNotMatch(answer.text, /\bat .*\.[jt]s:\d+|"stack"/, 'no stack trace');
  if (message !== undefined) assert.match(text, message);
  return text;
}

/**
 * An `Inbox` on a client of its own (closed when the test ends), to look at what the
 * service wrote without going through it.
 * @param prefix the service's `redisPrefix`
 */
export async function openInbox(t: CleanupContext, redisUrl: string, prefix = 'px:'): Promise<{ inbox: Inbox; redis: Redis }> {
  const redis = await createRedis({ url: redisUrl, commandTimeoutMs: 10_000, name: 'pixiu:test' });
  // Not QUIT: after a Redis restart the client may be between connections.
  t.after(() => redis.disconnect());
  return { inbox: new Inbox(redis, { prefix, cap: 10_000 }), redis };
}

/**
 * Resolves once `redis` is connected: at once when it is, else at its `ready` event
 * (after a Redis restart it reconnects on its own back-off).
 * @throws AbortError when it is not ready within `boundMs`
 */
export async function whenConnected(redis: Redis, boundMs = 15_000): Promise<void> {
  if (redis.status === 'ready') return;
  await once(redis, 'ready', { signal: AbortSignal.timeout(boundMs) });
}

/** Every retained entry of a user's inbox, oldest first, read in pages. */
export async function readWholeInbox(inbox: Inbox, uid: string): Promise<PageEntry[]> {
  const all: PageEntry[] = [];
  let after = 0;
  for (;;) {
    const page = await inbox.range(uid, after, 1000);
    all.push(...page.entries);
    const last = page.entries[page.entries.length - 1];
    if (last === undefined) return all;
    after = last.seq;
  }
}

/**
 * Polls `check` until it answers true, every `everyMs`, for at most `boundMs`. Only for
 * conditions with no event to wait on (a reconnect inside the service, a port).
 * @throws AssertionError naming `what` when the bound passes
 */
export async function waitUntil(what: string, check: () => Promise<boolean>, boundMs = 10_000, everyMs = 50): Promise<void> {
  const deadline = performance.now() + boundMs;
  while (!(await check())) {
    if (performance.now() > deadline) assert.fail(`${what}: not true within ${boundMs} ms`);
    await delay(everyMs);
  }
}

/**
 * `promise`'s value, or an AssertionError naming `what` when it has not settled within
 * `boundMs`: for a wait that a bug would make endless (a write on a stalled disk).
 */
export async function within<T>(boundMs: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new assert.AssertionError({ message: `${what}: not settled within ${boundMs} ms` })), boundMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether the Redis connection named `name` (its `CLIENT SETNAME`, ioredis's
 * `connectionName`) holds a `command` call on a CLIENT PAUSE (CLIENT LIST flag `b`,
 * `cmd=<command>`), as `probe`, another connection, sees it. What Redis itself shows,
 * not a client's private command queue; it names the command, not its arguments.
 * @param command lower case, as CLIENT LIST gives it (`evalsha`, `zadd`)
 */
export async function holdsOnPause(probe: Redis, name: string, command: string): Promise<boolean> {
  return String(await probe.call('CLIENT', 'LIST')).split('\n')
    .some((l) => l.includes(` name=${name} `) && /\bflags=\S*b/.test(l) && l.includes(` cmd=${command} `));
}

/**
 * Waits until a node at `url` takes no new connections (a fetch of its `/healthz`
 * fails): its shutdown has stopped HTTP listening.
 * @throws AssertionError when it still takes them after {@link waitUntil}'s bound
 */
export async function waitUntilNotAccepting(url: string): Promise<void> {
  await waitUntil('the node takes no new connections', async () => {
    try {
      await fetch(`${url}/healthz`);
      return false;
    } catch {
      return true;
    }
  });
}

/**
 * The value of one sample in Prometheus text, e.g. `metricSample(text,
 * 'pixiu_http_errors_total{code="INVALID_REQUEST"}')`; undefined when absent.
 */
export function metricSample(text: string, line: string): number | undefined {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

/**
 * Holds `bytes` of a node's history budget as an answer not yet taken by its client
 * would (a response that has not closed, on no connection), from the test.
 * @param user whose inbox the held answer is of (counted in that user's share)
 * @returns what gives them back (the response's close)
 */
export function holdHistoryBudget(budget: HistoryBudget, bytes: number, user = 'test holding the history budget'): () => void {
  const pending = Object.assign(new EventEmitter(), { headersSent: false });
  // By default for a user of its own: other users' requests are held to the node's budget alone.
  budget.hold({ raw: pending } as unknown as FastifyReply, bytes, user);
  return () => pending.emit('close');
}

/**
 * Deletes every key under `prefix`: a FLUSHALL of one test's keys, on a Redis other
 * tests share (KEYS: fine for a test's private redis-server).
 */
export async function flushPrefix(redis: Redis, prefix: string): Promise<void> {
  const all = await redis.keys(`${prefix}*`);
  if (all.length > 0) await redis.del(...all);
}

/**
 * Counts the writes the socket of `redis` hands to the kernel (one per call of Node's
 * `_write` or `_writev`), from now on: how many round trips a batch of calls took.
 */
export function countSocketWrites(redis: Redis): { readonly count: number; reset(): void } {
  const socket = redis.stream as net.Socket & { _write: (...a: unknown[]) => void; _writev?: (...a: unknown[]) => void };
  let writes = 0;
  const write = socket._write.bind(socket);
  const writev = socket._writev?.bind(socket);
  socket._write = (...a) => { writes += 1; write(...a); };
  if (writev) socket._writev = (...a) => { writes += 1; writev(...a); };
  return {
    get count() { return writes; },
    reset() { writes = 0; },
  };
}

/**
 * A store read's answer (one id's, or a list of them), asserted to hold no
 * unreadable mark (src/store/unreadable.ts): for tests that read back records they
 * wrote and use their fields.
 */
export function decoded<T>(record: T): Exclude<T, UnreadableRecord> {
  assert.ok(!isUnreadable(record as ReadRecord | null | undefined), `a record that cannot be decoded: ${JSON.stringify(record)}`);
  return record as Exclude<T, UnreadableRecord>;
}

/**
 * Asserts that MsgID `id` is the first `server` minted in its partition, on a new data
 * dir: exactly one past the time floor its start applied and logged (Service.timeFloor;
 * src/store/time-floor.ts), which must be the floor of the clock between the moment the
 * test started it and the moment it listened (`startedBetween`). An id minted second
 * (`floor + 2`), or after any other, fails.
 */
export function assertFirstMinted(id: string, what: string, server: Pick<InProcessServer, 'service' | 'startedBetween'>): void {
  const { counter } = decodeMsgId(id);
  const floor = server.service.timeFloor;
  assert.ok(floor !== undefined, `${what}: the start applied no time floor`);
  const { from, to } = server.startedBetween;
  assert.ok(floor >= (timeFloor(from) ?? Infinity) && floor <= (timeFloor(to) ?? -Infinity), `${what}: the start's time floor ${floor} is not the clock's during the start (${from}..${to} ms)`);
  assert.equal(counter, floor + 1, `${what}: counter ${counter} is not the first past the start's time floor ${floor}`);
}
