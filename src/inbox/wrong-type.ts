/**
 * An inbox key of another type than Pixiu writes there: what an append or a read that
 * Redis refused with `WRONGTYPE` is answered with, and what is logged of it.
 *
 * Pixiu writes each of a user's inbox keys with one type (src/redis/keys.ts). A key
 * of another type (an operator's `SET 'px:{u}:meta' x`, another program sharing the
 * prefix) makes every append to that user fail with Redis's `WRONGTYPE` reply, before
 * the append script writes anything (append-9.lua), and every read of the user's
 * inbox, ack cursors or epoch (history, delivery, acks, `GET /v1/messages/{id}`) fail
 * the same way; no retry cures it. So it is
 * not a 503 UNAVAILABLE ("retry later", which a producer would retry for ever, as a
 * reviewer found) but a 500 INTERNAL, whose message names the user, and whose cause,
 * logged at error with every request it fails (never thinned), names the key, its
 * type and the type Pixiu expects there: an operator deletes or repairs that key
 * (docs/api.md, "Errors", 500).
 */
import { ReplyError, type Redis } from 'ioredis';
import { PixiuError } from '../errors.js';
import { toRedisError } from '../redis/client.js';
import type { UserKeys } from '../redis/keys.js';

/** The type Pixiu writes at each inbox key of a user (src/redis/keys.ts), by role. */
const EXPECTED_TYPES = { inbox: 'stream', meta: 'hash', ids: 'zset', conns: 'hash', acks: 'hash' } as const;

/** A key of the wrong type: its name, the type Redis holds there, and Pixiu's. */
export interface WrongTypeKey {
  readonly key: string;
  /** What Redis's `TYPE` answered (`string`, `list`, …); undefined when it could not be read. */
  readonly type: string | undefined;
  readonly expected: string;
}

/**
 * The cause of the INTERNAL of {@link wrongTypeFailure}, for the log: its message and
 * fields name the user, the key(s) of the wrong type and `WRONGTYPE`.
 */
export class WrongTypeKeys extends Error {
  readonly user: string;
  readonly keys: readonly WrongTypeKey[];

  /**
   * @param keys the keys whose type is not Pixiu's; when their types could not be
   *   read, every inbox key of the user, each with `type` undefined
   * @param reply Redis's WRONGTYPE reply
   */
  constructor(user: string, keys: readonly WrongTypeKey[], reply: unknown) {
    const named = keys.map((k) => (k.type === undefined ? k.key : `${k.key} (a ${k.type}, not a ${k.expected})`));
    const which = keys.some((k) => k.type === undefined) ? `one of its keys ${named.join(', ')} (their types could not be read)` : named.join(', ');
    super(`WRONGTYPE: user ${JSON.stringify(user)}'s inbox key in Redis has another type than Pixiu writes there: ${which}. `
      + 'Appends to the user and reads of its inbox fail until an operator deletes or repairs it (docs/api.md, "Errors", 500)', { cause: reply });
    this.name = 'WrongTypeKeys';
    this.user = user;
    this.keys = keys;
  }
}

/** The appends' errors made by {@link wrongTypeReply}, not yet told which user they are. */
const wrongTypeReplies = new WeakSet<PixiuError>();

/** True when `err` is Redis's WRONGTYPE error reply (a command or a script on a key of another type). */
export function isWrongType(err: unknown): boolean {
  return err instanceof ReplyError && (err as Error).message.startsWith('WRONGTYPE');
}

/**
 * The rejection of an append that Redis refused with WRONGTYPE, as the append pipeline
 * makes it (it knows no user): INTERNAL, which {@link wrongTypeFailure} names.
 * @param reply Redis's error reply ({@link isWrongType})
 */
export function wrongTypeReply(reply: unknown): PixiuError {
  const err = new PixiuError('INTERNAL', 'internal error', { cause: reply });
  wrongTypeReplies.add(err);
  return err;
}

/** True when `err` was made by {@link wrongTypeReply}. */
export function isWrongTypeReply(err: unknown): err is PixiuError {
  return err instanceof PixiuError && wrongTypeReplies.has(err);
}

/** What a failed call on a user's inbox keys was doing: an append, or a read (or an ack, or an epoch rotation). */
export type WrongTypeUse = 'append' | 'read';

/**
 * What a call on `user`'s inbox keys that failed with `err` ({@link isWrongTypeReply})
 * is answered with: an INTERNAL whose message names the user and whose cause
 * ({@link WrongTypeKeys}) names the key, after reading the types of the user's inbox
 * keys (one `TYPE` each; when that fails, every key is named).
 * @param keys the user's inbox keys
 * @param use an append (its message says how to complete the message once repaired) or a read
 */
export async function wrongTypeFailure(redis: Redis, user: string, keys: UserKeys, err: PixiuError, use: WrongTypeUse = 'append'): Promise<PixiuError> {
  const roles = Object.keys(EXPECTED_TYPES) as (keyof typeof EXPECTED_TYPES)[];
  const types = await Promise.all(roles.map((role) => redis.type(keys[role]).catch(() => undefined)));
  const all = roles.map((role, i): WrongTypeKey => ({ key: keys[role], type: types[i], expected: EXPECTED_TYPES[role] }));
  const wrong = all.filter((k) => k.type !== undefined && k.type !== 'none' && k.type !== k.expected);
  const named = wrong.length > 0 ? wrong : all.map((k) => ({ ...k, type: undefined }));
  const what = `internal error: user ${JSON.stringify(user)}'s inbox cannot be ${use === 'append' ? 'written' : 'read'}: a key of it in Redis holds another type `
    + '(WRONGTYPE), which an operator must delete or repair (the node\'s log names it)';
  const then = use === 'append' ? '. Any other recipients have the message; once it is repaired, send it again with the same client_msg_id' : '';
  return new PixiuError('INTERNAL', what + then, { cause: new WrongTypeKeys(user, named, err.cause) });
}

/**
 * Runs `call`, a Redis call on `user`'s inbox keys other than an append (a read, an
 * ack, an epoch rotation), as `redisCall` does (src/redis/client.ts: Redis's failures
 * become UNAVAILABLE), except that Redis's `WRONGTYPE` becomes the INTERNAL of
 * {@link wrongTypeFailure} naming the user: no retry cures it, so it is no outage.
 * @param keys the user's inbox keys
 * @throws PixiuError INTERNAL for a key of the wrong type; UNAVAILABLE when Redis fails;
 *   a script's own INVALID_REQUEST or NOT_FOUND as such
 */
export async function userKeysCall<T>(redis: Redis, user: string, keys: UserKeys, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (isWrongType(err)) throw await wrongTypeFailure(redis, user, keys, wrongTypeReply(err), 'read');
    throw toRedisError(err);
  }
}
