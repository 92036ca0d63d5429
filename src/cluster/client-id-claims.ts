/**
 * `client_msg_id` across nodes (DESIGN.md §3: "storing the same client_msg_id again
 * returns the first MsgID and stores nothing"; §9). Each store keeps its own index of
 * the ids it stored, so on a Redis shared by several stores (data dirs) the same
 * `client_msg_id` sent to two nodes — a producer failing over after its node crashed,
 * a load balancer spreading retries — was stored twice and delivered twice. Here a
 * store claims each `client_msg_id` in Redis before it stores the message:
 *
 * - `<prefix>cmid:{<client_msg_id>}` holds `P|<store id>` while that store writes the
 *   message (`SET NX GET`, expiring after {@link PENDING_MS}), then the MsgID, kept as
 *   long as the message is — set only if the claim is still that store's
 *   (`lua/client-id-settle-1.lua`): a node stalled past the expiry finds whose claim
 *   took its place, and answers with that message instead of its own copy;
 * - a node that finds another store's MsgID answers the retry with it (the record read
 *   from that store, as every read of another node's message is); one that finds
 *   another store's pending claim answers 503 (the first attempt is being stored; retry);
 * - its own claim, pending or settled, is left to its own store's index.
 *
 * Only while the Redis is shared by more than one store (its store descriptions,
 * src/cluster/partition-claims.ts, re-read every {@link REFRESH_MS}; once seen shared,
 * for good, and also while it names no store: Redis lost them and the nodes have not
 * written theirs back yet): a single node pays no round trip for it. Known windows: a
 * message stored before a second store first started, or whose claim Redis lost,
 * retried on another store afterwards, is stored twice (docs/decisions.md, "Several
 * nodes").
 *
 * The claim and its settling go out through tick pipelines of their own
 * (src/inbox/tick-pipeline.ts), as the inbox appends do, not auto-pipelined: ioredis
 * keeps one auto-pipeline in flight per client and sends the next only once every
 * reply of it is in, so with Redis hung a claim made while one was in flight (another
 * claim a moment earlier, a lease renewal, a presence read) waited out that one's
 * command timeout before its own began, so its 503 came after up to two timeouts
 * (the chaos tester's F2: up to 3.3 s at 2 s, ~30 messages/s). Sent at once, each
 * times out on its own (test/service/redis-hung-shared.test.ts).
 *
 * A claim or a settle that got no reply (Redis hung, the connection lost) may still
 * run when Redis thaws: the claim's mark then refused a retry on another node for its
 * 30 s though nothing was being stored. Such an id is remembered
 * (src/cluster/claim-leftovers.ts) and, while no attempt of this node for it is under
 * way ({@link ClientIdClaims.claim} to {@link ClientIdClaims.end}), its mark is dropped
 * if it is still this store's pending one (compare-and-delete: never another store's
 * claim, never a settled one), or, for a settle (the message is stored here), the
 * settle is made again.
 */
import { Command, ReplyError, type Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { ClaimLeftovers } from './claim-leftovers.js';
import { outageFields } from '../errors.js';
import { TickPipeline } from '../inbox/tick-pipeline.js';
import { redisCall, toRedisError } from '../redis/client.js';
import { DELETE_IF } from '../redis/delete-if.js';
import type { Keys } from '../redis/keys.js';
import { onRedisClock, type RedisNow } from '../redis/redis-clock.js';
import { isNoScript, loadScripts, resendOnNoScript, scriptSha, sendEvalsha, type ScriptSpec } from '../redis/scripts.js';

/** `client-id-settle-1.lua`: KEYS claim; ARGV pending mark, found value, MsgID, expiry (ms). Replies the claim after. */
const SETTLE: ScriptSpec = { file: new URL('./lua/client-id-settle-1.lua', import.meta.url), numberOfKeys: 1 };

/** How long a claim stays pending without its store settling it (a node that crashed mid-write), ms. */
export const PENDING_MS = 30_000;
/** How often whether other stores share the Redis is read again, ms. */
export const REFRESH_MS = 5_000;
/** Most claims (or settlings) in one write (tick-pipeline.ts). */
const MAX_BATCH = 500;
const SETTLE_SHA = scriptSha(SETTLE);
const DELETE_IF_SHA = scriptSha(DELETE_IF);
const UTF8_REPLY = { replyEncoding: 'utf8' } as const;

/** A claim's value as Redis answers it: a string, or null for none. */
function claimValue(raw: unknown): string | null {
  return typeof raw === 'string' ? raw : null;
}

/**
 * True when a claim's or settle's failure came without a reply from Redis (a timeout,
 * the connection lost), so the command may have run or may run yet; false for an
 * error reply (it did not run). `err` is the call's rejection (toRedisError's, the
 * client's error its cause).
 */
function withoutReply(err: unknown): boolean {
  const cause = err instanceof Error && err.cause !== undefined ? err.cause : err;
  return !(cause instanceof ReplyError);
}

/** This node's attempts under way for one `client_msg_id`. */
interface Attempts {
  /** How many ({@link ClientIdClaims.claim} to {@link ClientIdClaims.end}); at least 1. */
  count: number;
  /** Serial of the latest one begun (`ClientIdClaims.#begun`). */
  latest: number;
}

/** What a failed attempt may have left in Redis: its claim's pending mark, or a claim not set to its stored message. */
type Leftover =
  /** The claim's `SET NX GET` got no reply: drop this store's pending mark if it is there. */
  | { readonly kind: 'claim' }
  /** The settle got no reply: make it again (its EVALSHA argv); the message is stored here. */
  | { readonly kind: 'settle'; readonly argv: string[] };

/** What a claim found. */
export type ClaimAnswer =
  /** This store holds the claim now (made by this call, or its own from before): store it here. */
  | { readonly state: 'mine' }
  /** Another store is storing a message under it now (or crashed doing so, until {@link PENDING_MS}). */
  | { readonly state: 'pending'; readonly storeId: string }
  /** A message is stored under it: its MsgID (maybe this store's own). */
  | { readonly state: 'stored'; readonly id: string };

/** Claims of `client_msg_id`s by this node's store. */
export class ClientIdClaims {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #pending: string;
  readonly #logger: Logger | undefined;
  #shared = false;
  /** Once the Redis was seen shared by several stores: it stays so (stores are not removed, only retired). */
  #everShared = false;
  #timer: NodeJS.Timeout | undefined;
  /** Claims: `SET key P|<store> PX … NX GET`, the key as the call's argument. */
  readonly #claims: TickPipeline<string, string | null>;
  /** Settlings: EVALSHA argv of `client-id-settle-1.lua`. */
  readonly #settles: TickPipeline<string[], string | null>;
  /** Attempts of this node under way, by `client_msg_id`: from {@link claim} to {@link end}. */
  readonly #attempts = new Map<string, Attempts>();
  /** Attempts begun so far ({@link claim}s), all ids: the serial of the latest, for {@link #dropMark}. */
  #begun = 0;
  /** Claims and settles that got no reply, to clear once Redis answers. */
  readonly #leftovers: ClaimLeftovers<Leftover>;
  /** Now by Redis's clock, ms: a settled claim's expiry is given on it. */
  readonly #redisNow: RedisNow;

  /**
   * @param storeId this node's store (src/store/layout.ts)
   * @param redisNow now by Redis's clock, ms (the node registry's: NodeRegistry.now,
   *   this machine's clock plus the offset measured at its last renewal); default this
   *   machine's clock (`Date.now`), for a Redis on this machine
   */
  constructor(redis: Redis, keys: Keys, storeId: string, logger?: Logger, redisNow: RedisNow = Date.now) {
    this.#redis = redis;
    this.#redisNow = redisNow;
    this.#keys = keys;
    const pending = `P|${storeId}`;
    this.#pending = pending;
    this.#logger = logger;
    loadScripts(redis, [SETTLE, DELETE_IF]);
    const pendingMs = String(PENDING_MS);
    this.#claims = new TickPipeline<string, string | null>(redis, {
      // A plain Command: never auto-pipelined, and the client's other SETs still are.
      send: (client, key) => {
        const command = new Command('set', [key, pending, 'PX', pendingMs, 'NX', 'GET'], UTF8_REPLY);
        client.sendCommand(command);
        const reply: Promise<unknown> = command.promise;
        return reply;
      },
      reply: claimValue,
      error: toRedisError,
    }, MAX_BATCH);
    this.#settles = new TickPipeline<string[], string | null>(redis, {
      send: sendEvalsha,
      // Not loaded (a SCRIPT FLUSH): sent again as a plain EVAL, which loads it (scripts.ts `resendOnNoScript`).
      resend: (client, argv, err) => resendOnNoScript(client, SETTLE, argv, err),
      reply: claimValue,
      error: toRedisError,
    }, MAX_BATCH);
    this.#leftovers = new ClaimLeftovers<Leftover>({
      busy: (cid) => this.#attempts.has(cid),
      clear: (cid, leftover) => this.#clear(cid, leftover),
    }, PENDING_MS, logger);
  }

  /** True while other stores share the Redis: ingest claims each `client_msg_id` then. */
  get active(): boolean {
    return this.#shared;
  }

  /**
   * Reads whether other stores share the Redis, now and every {@link REFRESH_MS}.
   * @throws PixiuError UNAVAILABLE when the first read fails
   */
  async start(): Promise<void> {
    await this.refresh();
    this.#timer = setInterval(() => {
      this.refresh().catch((err: unknown) => this.#logger?.warn(outageFields(err), 'reading the stores sharing Redis failed'));
    }, REFRESH_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#leftovers.stop();
  }

  /** Claims left by Redis failures that this node still means to clear (claim-leftovers.ts); tests wait on it. */
  get leftovers(): number {
    return this.#leftovers.size;
  }

  /** Tries to clear a leftover skipped so far because an attempt for its id was under way (claim-leftovers.ts); tests wait on it. */
  get leftoverTriesSkipped(): number {
    return this.#leftovers.skipped;
  }

  /**
   * Claims `clientMsgId` for this store unless it is claimed already. It begins an
   * attempt to store the message: call {@link end} once that is over (stored and
   * settled, released, or failed), whatever this answers or throws. While one is under
   * way, what an earlier attempt's failure left is not cleared (this one holds it now).
   * @throws PixiuError UNAVAILABLE when Redis fails (without a reply: what it may have
   *   written is cleared once Redis answers)
   */
  async claim(clientMsgId: string): Promise<ClaimAnswer> {
    this.#attempts.set(clientMsgId, { count: (this.#attempts.get(clientMsgId)?.count ?? 0) + 1, latest: ++this.#begun });
    try {
      return this.#answer(await this.#claims.call(this.#keys.clientIdClaim(clientMsgId)));
    } catch (err) {
      if (withoutReply(err)) this.#leftovers.add(clientMsgId, { kind: 'claim' });
      throw err;
    }
  }

  /** Ends the attempt {@link claim} began for `clientMsgId`. */
  end(clientMsgId: string): void {
    const attempts = this.#attempts.get(clientMsgId);
    if (attempts !== undefined && attempts.count > 1) attempts.count--;
    else this.#attempts.delete(clientMsgId);
  }

  /**
   * Reads the claim of `clientMsgId` without taking it: `mine` when there is none (or
   * it is this store's pending mark). For a question asked before a store, e.g. whether
   * a room message to a room without members is a retry (ingest.ts).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async lookup(clientMsgId: string): Promise<ClaimAnswer> {
    return this.#answer(await redisCall(() => this.#redis.get(this.#keys.clientIdClaim(clientMsgId))));
  }

  /**
   * Records that `clientMsgId` names MsgID `id`, until `expiresAt` (the message's), if
   * the claim is still this store's: missing, its pending mark, or `found` (a claim
   * naming a message that is gone, which this store stored anew). `expiresAt` is by this
   * machine's clock (the store's); Redis expires the claim by its own, so it is given
   * as the same moment on Redis's clock: with this machine's clock behind Redis's, the
   * claim lapsed that much before its message, and a retry on another node then stored
   * the message a second time.
   * @returns the claim after the call: stored `id` when it was set, else what took its
   *   place (another store's pending claim, or its MsgID)
   * @throws PixiuError UNAVAILABLE when Redis fails (without a reply: it is made again
   *   once Redis answers, so a retry on another node finds the message)
   */
  async settle(clientMsgId: string, id: string, expiresAt: number, found = ''): Promise<ClaimAnswer> {
    const key = this.#keys.clientIdClaim(clientMsgId);
    // An absolute time, not a PX from now: a settle made again after an outage (#clear) keeps it.
    const at = String(onRedisClock(expiresAt, this.#redisNow));
    const argv = [SETTLE_SHA, '1', key, this.#pending, found, id, at];
    try {
      return this.#answer(await this.#settles.call(argv));
    } catch (err) {
      if (withoutReply(err)) this.#leftovers.add(clientMsgId, { kind: 'settle', argv });
      throw err;
    }
  }

  /**
   * Clears what a failed attempt left (ClaimLeftovers calls it while no attempt for
   * `clientMsgId` is under way): a settle is made again, a claim's mark dropped
   * ({@link #dropMark}). Resolves once Redis answered; rejects when it did not.
   */
  async #clear(clientMsgId: string, leftover: Leftover): Promise<void> {
    if (leftover.kind === 'settle') {
      await this.#settles.call(leftover.argv);
      return;
    }
    await this.#dropMark(clientMsgId, 0);
  }

  /**
   * True while an attempt of this node for `clientMsgId` is under way ({@link claim} to
   * {@link end}) besides the caller's own `own` (1 for a caller inside its attempt, as
   * {@link release}; 0 for one outside any, as {@link #clear}).
   */
  #othersUnderWay(clientMsgId: string, own: 0 | 1): boolean {
    return (this.#attempts.get(clientMsgId)?.count ?? 0) > own;
  }

  /**
   * Drops this store's pending mark on `clientMsgId` by compare-and-delete (never another
   * store's claim, never a settled one), unless an attempt other than the caller's own
   * `own` ({@link #othersUnderWay}) is under way: every attempt of this node claims with
   * the same mark, so the mark is that attempt's now. Checked and written at once as a
   * plain command, not auto-pipelined, so a claim of a later attempt (made after the
   * check, sent at the end of its tick on its own pipeline) reaches Redis after it and is
   * never dropped by it; after NOSCRIPT (a SCRIPT FLUSH) it is sent as EVAL, unless an
   * attempt begun since the call is under way. Not `own` again there: by the time Redis
   * answers, the caller's attempt has usually ended (src/ingest/claimed-store.ts releases
   * without waiting, then ends), so a retry that claimed meanwhile, under way alone, would
   * pass for the caller's own and lose its mark. Any attempt under way then that began
   * before the call is the caller's own (the first check found no other).
   * Resolves once Redis answered, or at once when skipped; rejects when Redis did not answer.
   */
  async #dropMark(clientMsgId: string, own: 0 | 1): Promise<void> {
    if (this.#othersUnderWay(clientMsgId, own)) return;
    const begunBefore = this.#begun;
    const key = this.#keys.clientIdClaim(clientMsgId);
    const argv = [DELETE_IF_SHA, '1', key, this.#pending];
    try {
      await sendEvalsha(this.#redis, argv);
    } catch (err) {
      // Not loaded (a SCRIPT FLUSH), and an attempt begun since under way: the mark is its now.
      if (isNoScript(err) && (this.#attempts.get(clientMsgId)?.latest ?? 0) > begunBefore) return;
      const again = resendOnNoScript(this.#redis, DELETE_IF, argv, err);
      if (again === undefined) throw err;
      await again;
    }
  }

  /** A claim's value as an answer: none or this store's pending mark is `mine`. */
  #answer(value: string | null): ClaimAnswer {
    if (value === null || value === this.#pending) return { state: 'mine' };
    if (value.startsWith('P|')) return { state: 'pending', storeId: value.slice(2) };
    return { state: 'stored', id: value };
  }

  /**
   * Drops this store's pending claim after its write failed, so a retry anywhere goes on
   * at once. Call it within the attempt, before its {@link end}. Never rejects; on
   * failure the mark expires on its own after {@link PENDING_MS}.
   *
   * Not while another attempt of this node for `clientMsgId` is under way (a retry to
   * this node while this one was being written): it claimed with the same mark, found it
   * its own, and is storing the message under it, so dropping it would let a retry on
   * another node store the message a second time. That attempt settles the mark or
   * releases it itself. Should it fail too before this one has ended (both in one
   * failed write), neither drops it and it lapses after {@link PENDING_MS}: a retry on
   * another node is refused (503) until then, never stored twice.
   */
  async release(clientMsgId: string): Promise<void> {
    await this.#dropMark(clientMsgId, 1).catch(() => undefined);
  }

  /**
   * Reads again whether other stores share the Redis ({@link start} does every
   * {@link REFRESH_MS}).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async refresh(): Promise<void> {
    const stores = await redisCall(() => this.#redis.hlen(this.#keys.storeDescriptions()));
    this.#everShared ||= stores > 1;
    this.#shared = this.#everShared || stores !== 1;
  }
}
