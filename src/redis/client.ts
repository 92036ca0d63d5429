/**
 * Redis connections: one factory with Pixiu's failure policy, and the one place that
 * turns a Redis failure into a catalogue error.
 *
 * Policy: commands never wait for a connection that is down. With the offline queue
 * off, a command issued while Redis is unreachable fails at once; a command already
 * sent when the connection dies fails within `commandTimeoutMs`. Either way the caller
 * gets {@link PixiuError} UNAVAILABLE and may retry. A command in flight when the
 * connection drops is also sent again by ioredis once it is back
 * (`autoResendUnfulfilledCommands`, left on), even after its caller's timeout: it may
 * run twice, or run late, after commands sent since. Pixiu's scripts are idempotent,
 * so a command that did run before its reply was lost is harmless to resend — except a
 * presence add run late, which may replace a newer connection of its device: its node
 * settles every failed add Redis may have run ({@link mayHaveRun}), and writes such a
 * connection back (src/cluster/presence-settle.ts; docs/decisions.md, "A presence add
 * whose reply is lost").
 */
import { Redis, ReplyError, type RedisOptions } from 'ioredis';
import { PixiuError, outageFields, unavailable } from '../errors.js';
import type { Logger } from '../logger.js';
import { OUTAGE_LOG_INTERVAL_MS, LogThrottle, thinnedFields } from '../log-throttle.js';
import { refusalOf } from './command-refusal.js';
import { sayLoadingWait } from './loading-wait.js';
import { connectRefusalWords, isCredentialsRefusal, isNotRedis, plainReason } from './plain-reasons.js';
import { PROBE_COMMAND } from './readiness-probe.js';
import { redisStateReason } from './state-replies.js';
import { redactUrl, redisTarget } from './url.js';

/** Options of {@link createRedis}. */
export interface RedisClientOptions {
  /** `redis://`, `rediss://` or `unix://` URL. */
  readonly url: string;
  /** Bound on one command, ms; past it the command fails as UNAVAILABLE. */
  readonly commandTimeoutMs: number;
  /** Shown in `CLIENT LIST`, e.g. `pixiu:ingest`. */
  readonly name?: string;
  /** Where connection errors are logged (at warn, one line per failed reconnect). */
  readonly logger?: Logger;
  /** For a connection that runs blocking reads (XREAD BLOCK): no command timeout. */
  readonly blocking?: boolean;
}

/** Reconnect back-off: 50 ms doubling to at most 2 s, with jitter. */
function retryDelayMs(times: number): number {
  return Math.min(50 * 2 ** Math.min(times, 6), 2000) + Math.floor(Math.random() * 50);
}

/**
 * Creates a connected client. Resolves once Redis answers; rejects with UNAVAILABLE
 * when it cannot be reached within the command timeout (or 5 s, the larger).
 * Auto-pipelining is on: calls made in one tick share one round trip.
 *
 * @throws PixiuError UNAVAILABLE when Redis is unreachable at start, with the reason
 *   Redis or the socket gave (a wrong password, a refused connection, a server there
 *   that does not speak the Redis protocol), or refuses
 *   the database the URL names; or when it took the connection and did not answer in
 *   time ({@link stalledOnConnect}: not "cannot reach", walk29 F9)
 * @throws RedisUrlError when the URL cannot be read (src/redis/url.ts)
 */
export async function createRedis(opts: RedisClientOptions): Promise<Redis> {
  const base: RedisOptions = {
    lazyConnect: true,
    enableAutoPipelining: true,
    // A readiness probe goes out at once: auto-pipelined, it would wait for the
    // pipeline in flight before it (ioredis runs one at a time), so with Redis hung
    // /readyz answered after up to two command timeouts instead of one. PING too (the
    // service's own checks).
    autoPipeliningIgnoredCommands: ['ping', PROBE_COMMAND],
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: opts.blocking ? undefined : opts.commandTimeoutMs,
    connectTimeout: Math.max(opts.commandTimeoutMs, 5000),
    retryStrategy: retryDelayMs,
    connectionName: opts.name,
  };
  const target = redisTarget(opts.url);
  const redis = typeof target === 'string' ? new Redis(target, base) : new Redis({ ...base, ...target });
  handleRestoreFailures(redis);
  let lastError = '';
  // A server that is not Redis: its answer fails the decoder, and the socket errors
  // that follow (EPIPE, ECONNRESET as it closes on what it could not read either) say
  // less, so the start's message gives this one.
  let notRedis = '';
  // A connection error since the last `ready`: that `ready` restores it. Redis refusing
  // a command ioredis sent on its own (AUTH, SELECT) is no lost connection: alone, the
  // `ready` after it restores nothing (it was logged just before the start's fatal
  // message for a database Redis lacks, checkDatabase's).
  let lost = false;
  // A refusal repeated at every reconnect is logged again at most once per interval.
  const refusals = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  redis.on('error', (err: Error) => {
    const refusal = err.name === 'ReplyError';
    if (!refusal) lost = true;
    // Until the next `ready`, or another failure (Redis gone): see connectRefusal.
    if (refusal) connectRefusals.set(redis, connectRefusalWords(err.message));
    else connectRefusals.delete(redis);
    // ioredis emits one error per failed (re)connect; log changes, not repeats — but a
    // refusal (a password Redis now requires) again every interval while it lasts: the
    // warnings of the commands refused meanwhile say only "connection lost".
    const repeated = err.message === lastError;
    if (!repeated) refusals.take();
    const left = !repeated ? 0 : refusal ? refusals.take() : undefined;
    if (left !== undefined) {
      opts.logger?.warn({ ...outageFields(err), redis: opts.name, ...thinnedFields(left) }, refusal ? 'redis refused a command sent on connecting' : 'redis connection error');
    }
    lastError = err.message;
    if (isNotRedis(err)) notRedis = err.message;
  });
  redis.on('ready', () => {
    if (lost) opts.logger?.info({ redis: opts.name }, 'redis connection restored');
    lastError = '';
    lost = false;
    connectRefusals.delete(redis);
  });
  // A Redis loading its data: the ready check waits, said once (loading-wait.ts).
  const loadingWatch = opts.logger === undefined ? undefined : sayLoadingWait(redis, opts.logger, { redis: opts.name, redisUrl: redactUrl(opts.url) });
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    // connect() itself often says only "Connection is closed."; the error event before
    // it says why (WRONGPASS, ECONNREFUSED, a server that is not Redis …), in plain
    // words as the log line gives it (src/redis/plain-reasons.ts).
    const raw = notRedis !== '' ? notRedis : lastError !== '' ? lastError : (err as Error).message;
    // ioredis's ready check (INFO) on a Redis that renamed INFO away fails the connect.
    const refused = refusalOf(raw);
    if (refused !== undefined) throw unavailable(`cannot use Redis at ${redactUrl(opts.url)}: ${refused.words}`, err);
    // The connection was made, and its first command (the ready check's INFO) not
    // answered in time: a Redis stalled (paused, a long command, a fork), not one out of reach.
    if (raw === COMMAND_TIMED_OUT) {
      const stalled = unavailable(`Redis at ${redactUrl(opts.url)} took the connection but did not answer within the command timeout (${opts.commandTimeoutMs} ms): it is stalled (paused, busy with a long command) or overloaded`, err);
      stalledConnects.add(stalled);
      throw stalled;
    }
    const reason = plainReason(raw);
    // Reached, and its credentials refused (a wrong or missing password): not out of reach (walk30).
    if (isCredentialsRefusal(raw)) throw unavailable(`Redis at ${redactUrl(opts.url)} refused the connection's credentials: ${reason}`, err);
    throw unavailable(`cannot reach Redis at ${redactUrl(opts.url)}: ${reason}${tlsHint(opts.url, reason)}`, err);
  } finally {
    loadingWatch?.();
  }
  await checkDatabase(redis, opts.url);
  return redis;
}

/** The errors of {@link createRedis} for a Redis that took the connection and did not answer in time. */
const stalledConnects = new WeakSet<Error>();

/**
 * True when `err` is {@link createRedis}'s for a Redis that took the connection but did
 * not answer its first command within the command timeout: reached, and stalled — a
 * start may try again (src/service/redis-start.ts), where a refused connection or a
 * wrong password will not pass by waiting a few seconds.
 */
export function stalledOnConnect(err: unknown): boolean {
  return err instanceof Error && stalledConnects.has(err);
}

/**
 * For a `rediss://` URL whose connection timed out or failed its TLS handshake: a Redis
 * without TLS there never answers the handshake (the client gives up after its connect
 * timeout, `connect ETIMEDOUT`, nothing saying TLS: an SRE's finding). Else ''.
 */
function tlsHint(url: string, reason: string): string {
  // Error codes and Node's TLS wording only, case-sensitive: the reason holds the host
  // too, and `rediss://my-tls-redis.invalid` (ENOTFOUND) is no TLS problem (review4 F3).
  if (!/^rediss:/i.test(url) || !/\b(ETIMEDOUT|EPROTO|ECONNRESET|ERR_SSL_\w+|ERR_TLS_\w+)\b|secure TLS connection/.test(reason)) return '';
  return ' (rediss:// connects with TLS: is this Redis TLS-enabled? A Redis without TLS takes redis://)';
}

/** Each client's refusal on connecting, in plain words, while it lasts (see {@link connectRefusal}). */
const connectRefusals = new WeakMap<Redis, string>();

/**
 * Why `redis` cannot connect when Redis refused a command the client sends on
 * connecting (HELLO or AUTH without the password Redis now requires, a wrong one,
 * SELECT), in plain words (plain-reasons.ts `connectRefusalWords`); undefined when its
 * last (re)connect was not refused so, or it is ready. Meanwhile every command fails
 * as a lost connection, which is all those failures say.
 */
export function connectRefusal(redis: Redis): string | undefined {
  return connectRefusals.get(redis);
}

/**
 * Makes sure the connection uses the database the URL names (`/N`, `?db=N`). ioredis
 * sends SELECT after connecting but goes on when Redis refuses it: a number past the
 * Redis's `databases` ("ERR DB index is out of range") left the client in database
 * 0, where another deployment's keys may be (a fresh tester's finding: the service
 * started and wrote there). SELECT is asked again here, and its refusal refused.
 * Nothing is asked for database 0.
 *
 * @throws PixiuError UNAVAILABLE naming the database and Redis's answer (the client
 *   is disconnected first)
 */
async function checkDatabase(redis: Redis, url: string): Promise<void> {
  const db = redis.options.db ?? 0;
  if (db === 0) return;
  try {
    await redis.select(db);
  } catch (err) {
    redis.disconnect();
    throw unavailable(`cannot use database ${db} of Redis at ${redactUrl(url)}: ${(err as Error).message} (a Redis has as many databases as its \`databases\` setting, 16 by default, numbered from 0)`, err);
  }
}

/** The calls ioredis makes on its own after a reconnect, to restore a client's state. */
const RESTORE_CALLS = ['subscribe', 'psubscribe', 'ssubscribe', 'select'] as const;

/**
 * Makes every promise of the calls ioredis 6.0.0 makes on its own after a reconnect
 * (re-SUBSCRIBE, re-SELECT: `readyHandler` in its event_handler.js) a handled one.
 * It makes them fire-and-forget, so when the connection drops again at that moment
 * (Redis stopping right after it came back) the rejection went unhandled, and an
 * unhandled rejection ends the process (Node's default; src/cli/serve.ts logs it as "pixiu crashed"). Fixed upstream in
 * redis/ioredis#2187, not in a release yet. A caller of these methods still gets the
 * rejection; the restore that failed is followed by another reconnect, and the
 * subscribers re-subscribe what they need on every `ready` (bus.ts, channel-hub.ts).
 */
function handleRestoreFailures(redis: Redis): void {
  const methods = redis as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const name of RESTORE_CALLS) {
    const original = methods[name]?.bind(redis);
    if (original === undefined) continue;
    methods[name] = (...args: unknown[]) => {
      const reply = original(...args);
      reply.catch(() => undefined);
      return reply;
    };
  }
}

/** The UNAVAILABLE errors made for a failed Redis call (see {@link isRedisFailure}). */
const redisFailures = new WeakSet<PixiuError>();

/**
 * An UNAVAILABLE error for a Redis call that failed, marked as one: what
 * `pixiu_redis_errors_total{kind="request"}` counts (src/api/app.ts), unlike an
 * UNAVAILABLE of the store, of another node or of a busy node.
 * @param message a client-safe sentence
 * @param cause the Redis client's error, for logs only
 */
export function redisUnavailable(message: string, cause: unknown): PixiuError {
  const err = unavailable(message, cause);
  redisFailures.add(err);
  return err;
}

/** True when `err` was made by {@link redisUnavailable} (or {@link toRedisError}) for a failed Redis call. */
export function isRedisFailure(err: unknown): boolean {
  return err instanceof PixiuError && redisFailures.has(err);
}

/**
 * Maps any error from a Redis call to a catalogue error. Already-catalogued errors
 * pass through; script error replies that start with a catalogue code
 * (`INVALID_REQUEST …`) keep it; the append script's `EARLIER_MISSING` is UNAVAILABLE
 * saying so, a Redis failure as the earlier append's was; everything else (timeouts, closed connections,
 * refused connects, OOM, LOADING) is UNAVAILABLE, marked as a Redis failure
 * ({@link isRedisFailure}). Its message names a Redis state reply's cause in plain
 * words (`Redis refuses writes: it is out of memory (maxmemory); retry later`:
 * src/redis/state-replies.ts), a timeout as such, anything else only
 * `Redis is unavailable, retry later`.
 */
export function toRedisError(err: unknown): PixiuError {
  if (err instanceof PixiuError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const m = /^(?:ERR )?(?:user_script:\d+: )?(INVALID_REQUEST|NOT_FOUND|EARLIER_MISSING) (.*)$/s.exec(message);
  if (m?.[1] === 'EARLIER_MISSING') return redisUnavailable(EARLIER_MISSING, err);
  if (m && m[1] !== undefined && m[2] !== undefined) return new PixiuError(m[1] as 'INVALID_REQUEST' | 'NOT_FOUND', m[2], { cause: err });
  const state = redisStateReason(err);
  return redisUnavailable(state !== undefined ? `${state}; retry later` : isCommandTimeout(err) ? TIMED_OUT : 'Redis is unavailable, retry later', err);
}

/**
 * What an append refused for an earlier one of its batch to the same user is answered
 * with (`append-13.lua` step 2a, src/inbox/append-chain.ts): that one failed (its item
 * says why), and this one waits for its retry, as the items after it whose appends had
 * not gone out do (docs/api.md "Messages").
 */
const EARLIER_MISSING = 'an earlier message of this batch to the same user was not appended (Redis failed it); '
  + 'retry the failed items, in batch order';

/**
 * What a Redis call that timed out is answered with. A timeout is not proof that Redis
 * is down: a node whose event loop is saturated reads Redis's answer too late as well
 * (a fresh tester's 800 parallel history readers had commands time out while
 * `redis-cli ping` answered at once), so the answer says both.
 */
const TIMED_OUT = 'Redis did not answer within the command timeout (Redis down or hung, or this node too busy to read its answer in time); retry later';

/** True when `err` is ioredis's command timeout (`commandTimeout`, createRedis). */
export function isCommandTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === COMMAND_TIMED_OUT;
}

/** ioredis's message for a command past `commandTimeout`. */
const COMMAND_TIMED_OUT = 'Command timed out';

/** ioredis's message for a command refused, unsent, while the connection is down (`enableOfflineQueue` off: createRedis). */
const REFUSED_OFFLINE = 'Stream isn\'t writeable and enableOfflineQueue options is false';

/**
 * Whether Redis may have run a call that failed with `err` (as {@link redisCall} or
 * `keysCall` threw it): true for a command timeout, a connection lost after the
 * command was written (ioredis may even send it again once the connection is back),
 * and any failure it cannot place. False when it provably did not run, or Redis
 * answered it: an error that is no Redis failure (a catalogue error of the caller's or
 * of a script's own reply, INVALID_REQUEST, a key of the wrong type named INTERNAL),
 * Redis's error reply (a script with a flags line is refused whole, before it runs:
 * OOM, READONLY, LOADING, BUSY; Pixiu's scripts answer their own errors before they
 * write), and the command refused before it was sent while the connection was down.
 * What a node settles after a failed presence add depends on it (src/cluster/presence.ts `add`).
 */
export function mayHaveRun(err: unknown): boolean {
  if (!isRedisFailure(err)) return false;
  const cause = (err as PixiuError).cause;
  if (cause instanceof ReplyError) return false;
  return !(cause instanceof Error && cause.message === REFUSED_OFFLINE);
}

/**
 * Runs one Redis call and maps its failure with {@link toRedisError}.
 * @throws PixiuError UNAVAILABLE (or the script's catalogue code)
 */
export async function redisCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toRedisError(err);
  }
}

/**
 * Now on Redis's clock (`TIME`), ms since the Unix epoch: the one clock of the nodes
 * sharing a Redis (registrations, partition claims, room join slots), where each
 * node's own would do only if every node's agreed.
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function redisNowMs(redis: Redis): Promise<number> {
  const [sec, usec] = await redisCall(() => redis.time());
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/**
 * Runs a MULTI … EXEC (`exec` is the chained transaction's `exec()`) and answers its
 * commands' replies, in order: read as one snapshot.
 * @throws PixiuError as {@link toRedisError} maps it, when the transaction was aborted
 *   or any command in it failed
 */
export async function transaction(exec: () => Promise<[Error | null, unknown][] | null>): Promise<unknown[]> {
  const replies = await redisCall(exec);
  if (replies === null) throw toRedisError(new Error('the transaction was aborted'));
  const failed = replies.find(([err]) => err !== null)?.[0];
  if (failed) throw toRedisError(failed);
  return replies.map(([, reply]) => reply);
}
