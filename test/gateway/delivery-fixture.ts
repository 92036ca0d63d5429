/**
 * What the delivery tests share (DESIGN.md §5, §6): a service with its own key prefix
 * and an Inbox on its keys, a user's inbox filled over the real HTTP API in batches, a
 * run of frames read from a {@link TestClient} with every one of them asserted (none is
 * skipped, unlike `nextOf`), and the wait for an ack cursor to reach Redis.
 */
import assert from 'node:assert/strict';
import type { ConfigOverrides } from '../../src/config/config.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import type { Redis } from 'ioredis';
import type { Logger } from '../../src/logger.js';
import { openInbox, waitUntil } from '../harness/checks.js';
import type { CleanupContext, PixiuClient } from '../harness/pixiu-server.js';
import type { Frame, TestClient } from '../harness/ws-client.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

/**
 * A service for delivery tests on `settings.redisUrl` with its own key prefix and the
 * store's relaxed durability (these tests are about delivery, not fsync), and an
 * `Inbox` on its keys to read cursors with; its log goes to `logger` when one is given.
 */
export async function startDelivery(
  t: CleanupContext, prefix: string, settings: ConfigOverrides & { redisUrl: string }, logger?: Logger,
): Promise<{ gw: GatewayFixture; inbox: Inbox; redis: Redis }> {
  const gw = await startGateway(t, { redisPrefix: `${prefix}:`, storeDurability: 'relaxed', ...settings }, logger);
  const { inbox, redis } = await openInbox(t, settings.redisUrl, `${prefix}:`);
  return { gw, inbox, redis };
}

/** Most messages in one `POST /v1/messages/batch` (DESIGN.md §7). */
const BATCH_MAX = 1000;

/** Most bytes of JSON in one batch body: under the default `PIXIU_MAX_BODY_BYTES` (1 MiB), with room for the envelope. */
const BATCH_BODY_BYTES = 1000 * 1024;

/** What `POST /v1/messages/batch` answers per item. */
interface BatchItem {
  status: number;
  id?: string;
  recipients?: { user: string; seq: number }[];
}

/** Options of {@link postMany}. */
export interface PostManyOptions {
  /** The `data` of the i-th message (0-based); default `{ i }`. */
  data?: (i: number) => unknown;
}

/**
 * Posts `count` messages to `user` in batches (of at most {@link BATCH_MAX} items and
 * {@link BATCH_BODY_BYTES} of JSON) and asserts each was created at the next seq after
 * `firstSeq - 1`.
 * @returns the MsgIDs, index i holding seq `firstSeq + i`
 */
export async function postMany(client: PixiuClient, user: string, count: number, firstSeq = 1, opts: PostManyOptions = {}): Promise<string[]> {
  const ids: string[] = [];
  while (ids.length < count) {
    const messages: unknown[] = [];
    let bytes = 0;
    while (messages.length < BATCH_MAX && ids.length + messages.length < count) {
      const i = ids.length + messages.length;
      const message = { to: user, type: 'test.seq', data: opts.data ? opts.data(i) : { i } };
      bytes += Buffer.byteLength(JSON.stringify(message)) + 1;
      if (messages.length > 0 && bytes > BATCH_BODY_BYTES) break;
      messages.push(message);
    }
    const answer = await client.post('/v1/messages/batch', { messages });
    assert.equal(answer.status, 200, answer.text.slice(0, 300));
    for (const item of (answer.body as { results: BatchItem[] }).results) {
      assert.equal(item.status, 201, JSON.stringify(item));
      assert.deepEqual(item.recipients, [{ user, seq: firstSeq + ids.length }]);
      ids.push(item.id as string);
    }
  }
  return ids;
}

/** Posts one message to `user`; returns its id and seq. */
export async function postOne(client: PixiuClient, user: string, body: Record<string, unknown> = {}): Promise<{ id: string; seq: number }> {
  const answer = await client.post('/v1/messages', { to: user, type: 'test.one', data: { one: true }, ...body });
  assert.equal(answer.status, 201, answer.text);
  const created = answer.body as { id: string; recipients: { user: string; seq: number }[] };
  const seq = created.recipients[0]?.seq;
  assert.equal(typeof seq, 'number');
  return { id: created.id, seq: seq as number };
}

/** The `seq` of a `msg` frame. */
export function seqOf(frame: Frame): number {
  assert.equal(typeof frame.seq, 'number', JSON.stringify(frame));
  return frame.seq as number;
}

/** Reads the next frame and asserts its type. */
export async function expectFrame(client: TestClient, t: string, timeoutMs?: number): Promise<Frame> {
  const frame = await client.next(timeoutMs);
  assert.equal(frame.t, t, `expected a ${t} frame, got ${JSON.stringify(frame)}`);
  return frame;
}

/** Reads the `welcome` and checks where delivery starts (`resume_from`) and the latest seq. */
export async function expectWelcome(client: TestClient, resumeFrom: number, latest: number): Promise<Frame> {
  const w = await expectFrame(client, 'welcome');
  assert.equal(w.resume_from, resumeFrom, 'resume_from');
  assert.equal(w.seq, latest, 'latest seq');
  return w;
}

/** Options of {@link expectMsgs}. */
export interface ExpectMsgsOptions {
  /** Ack (cumulatively) after every this many messages and after the last; 0: never. Default 1. */
  ackEvery?: number;
  /** Bound for each frame, ms. */
  timeoutMs?: number;
}

/**
 * Reads frames and asserts they are exactly `msg` seq `from..to` in order, with the
 * ids `ids[seq - idBase]` and not marked redelivered. Every frame is checked: a `gap`,
 * a repeat or a skipped seq fails.
 * @returns the frames
 */
export async function expectMsgs(
  client: TestClient, from: number, to: number, ids: readonly string[], idBase = 1, opts: ExpectMsgsOptions = {},
): Promise<Frame[]> {
  const ackEvery = opts.ackEvery ?? 1;
  const frames: Frame[] = [];
  for (let seq = from; seq <= to; seq++) {
    const f = await client.next(opts.timeoutMs);
    assert.equal(f.t, 'msg', `expected msg ${seq}, got ${JSON.stringify(f)}`);
    assert.equal(f.seq, seq, `expected msg ${seq}, got ${JSON.stringify(f)}`);
    assert.equal(f.id, ids[seq - idBase], `id of seq ${seq}`);
    assert.equal(f.redelivered, undefined, `seq ${seq} is a first delivery`);
    frames.push(f);
    if (ackEvery > 0 && ((seq - from + 1) % ackEvery === 0 || seq === to)) client.ack(seq);
  }
  return frames;
}

/**
 * Waits, bounded, until `device`'s ack cursor in Redis is `seq` (cursors are written
 * coalesced, DESIGN.md §5, so there is no event to wait on). Fails if it goes past.
 * @returns every device's cursor at that moment
 */
export async function waitCursor(inbox: Inbox, user: string, device: string, seq: number, boundMs = 10_000): Promise<Record<string, number>> {
  let cursors: Record<string, number> = {};
  await waitUntil(`${user}/${device} cursor at ${seq}`, async () => {
    cursors = await inbox.cursors(user);
    const at = (Object.hasOwn(cursors, device) ? cursors[device] : undefined) ?? 0;
    assert.ok(at <= seq, `${user}/${device} cursor ${at} went past ${seq}`);
    return at === seq;
  }, boundMs, 20);
  return cursors;
}

/**
 * Takes a snapshot (DUMP) of a user's inbox keys; the function returned gives them back
 * as they were (RESTORE, or DEL of a key that did not exist): Redis giving the inbox back
 * with less, same epoch (a restored snapshot, a failover: DESIGN.md §11).
 */
export async function snapshotInbox(raw: Redis, keys: { inbox: string; meta: string; ids: string; acks: string }): Promise<() => Promise<void>> {
  const names = [keys.inbox, keys.meta, keys.ids, keys.acks];
  const dumps = await Promise.all(names.map((k) => raw.dumpBuffer(k)));
  return async () => {
    for (const [i, key] of names.entries()) {
      const dump = dumps[i];
      if (dump === null || dump === undefined) await raw.del(key);
      else await raw.restore(key, 0, dump, 'REPLACE');
    }
  };
}

/** Reads `client`'s frames up to the `pong` of a `ping` sent now (every frame written before it), acking each `msg`. */
export async function framesUpToPong(client: TestClient): Promise<Frame[]> {
  client.send({ t: 'ping' });
  const frames: Frame[] = [];
  for (let f = await client.next(); f.t !== 'pong'; f = await client.next()) {
    frames.push(f);
    if (f.t === 'msg') client.ack(f.seq as number);
  }
  return frames;
}
