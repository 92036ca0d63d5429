/**
 * A key of another type than Pixiu writes there: what a call that Redis refused with
 * `WRONGTYPE` is answered with, and what is logged of it. For a user's inbox keys and
 * the presence keys a handshake writes, a room's keys, the broadcast stream's and a
 * channel's.
 *
 * Pixiu writes each of its keys with one type (src/redis/keys.ts). A key of another
 * type (an operator's `SET 'px:{u}:meta' x` or `SET 'px:broadcast' x`, another program
 * sharing the prefix) makes every call on it fail with Redis's `WRONGTYPE` reply: every
 * append to that user (before the append script writes anything, append-13.lua) and
 * every read of the user's inbox, ack cursors or epoch; every WebSocket handshake of
 * the user (of its `replaced` key: those replacing their device's connection); every
 * membership change or listing of that room and every message to it; every broadcast
 * and every read of the broadcast stream (the node's reader, a client's catch-up);
 * every publication to that channel and every `sub` of it (its newest id, its
 * history). No retry cures it. So it
 * is not a 503 UNAVAILABLE ("retry later", which a producer would retry for ever, as
 * reviewers found, first for inboxes, then for rooms and broadcasts, then channels)
 * but a 500 INTERNAL, whose message names the user, the room, the broadcast stream or
 * the channel, and whose cause, logged at error with every request it fails (never
 * thinned), names the key, its type and the type Pixiu expects there: an operator
 * deletes or repairs that key (docs/api.md, "Errors", 500).
 */
import { ReplyError, type Redis } from 'ioredis';
import { PixiuError } from '../errors.js';
import { toRedisError } from './client.js';
import type { Keys, UserKeys } from './keys.js';

/** A key and the type Pixiu writes there, as Redis's `TYPE` says it (`stream`, `hash`, `zset`, `string`). */
export interface TypedKey {
  readonly key: string;
  readonly expected: string;
}

/** A key of the wrong type: its name, the type Redis holds there, and Pixiu's. */
export interface WrongTypeKey extends TypedKey {
  /** What Redis's `TYPE` answered (`string`, `list`, …); undefined when it could not be read. */
  readonly type: string | undefined;
}

/**
 * Whose keys a call works on: a user's inbox, a user's presence, a room, the broadcast
 * stream or a channel, as the answer and the log line of a key of the wrong type name
 * it ({@link inboxKeys}, {@link presenceKeys}, {@link roomKeys}, {@link broadcastKeys},
 * {@link channelKeys}).
 */
export interface KeyOwner {
  /** The owner, in the answer: `user "u"'s inbox`, `user "u"'s presence`, `room "lobby"`, `the broadcast stream`, `channel "live.s1"`. */
  readonly name: string;
  /** Its key, in the log line: `user "u"'s inbox key`, `user "u"'s presence key`, `room "lobby"'s key`, `the broadcast stream's key`, `channel "live.s1"'s key`. */
  readonly keyName: string;
  /** What fails until the key is repaired, in the log line: `Appends to the user and reads of its inbox fail`. */
  readonly fails: string;
  /** The user whose inbox or presence it is (a field of the log line's `err`). */
  readonly user?: string;
  /** The room (a field of the log line's `err`). */
  readonly room?: string;
  /** The channel (a field of the log line's `err`). */
  readonly channel?: string;
  /** Its keys, each with the type Pixiu writes there. */
  readonly keys: readonly TypedKey[];
}

/** The keys of `user`'s inbox (src/redis/keys.ts `UserKeys`). */
export function inboxKeys(user: string, keys: UserKeys): KeyOwner {
  const name = `user ${JSON.stringify(user)}'s inbox`;
  return {
    name, keyName: `${name} key`, fails: 'Appends to the user and reads of its inbox fail', user,
    keys: [
      { key: keys.inbox, expected: 'stream' }, { key: keys.meta, expected: 'hash' }, { key: keys.ids, expected: 'zset' },
      { key: keys.conns, expected: 'hash' }, { key: keys.acks, expected: 'hash' },
    ],
  };
}

/**
 * The presence keys of `user` a device's handshake writes (src/cluster/presence.ts
 * `add`, presence-add-2.lua): its entries, and what each add replaced.
 */
export function presenceKeys(user: string, keys: UserKeys): KeyOwner {
  const name = `user ${JSON.stringify(user)}'s presence`;
  return {
    name, keyName: `${name} key`, fails: 'WebSocket handshakes of the user\'s devices (of the replaced key: those replacing a connection of their device) fail', user,
    keys: [{ key: keys.conns, expected: 'hash' }, { key: keys.replaced, expected: 'hash' }],
  };
}

/** The keys of `room` (src/rooms/membership.ts): its members, cut and top. */
export function roomKeys(room: string, keys: Keys): KeyOwner {
  const name = `room ${JSON.stringify(room)}`;
  return {
    name, keyName: `${name}'s key`, fails: 'Membership changes and listings of the room and messages to it fail', room,
    keys: [
      { key: keys.roomMembers(room), expected: 'zset' }, { key: keys.roomCut(room), expected: 'string' },
      { key: keys.roomTop(room), expected: 'string' },
    ],
  };
}

/**
 * The broadcast stream's key and, for a broadcast sent with a `client_msg_id`, its
 * marker (src/broadcast/broadcast-stream.ts).
 * @param msgId the MsgID of the broadcast whose marker the call reads
 */
export function broadcastKeys(keys: Keys, msgId?: string): KeyOwner {
  return {
    name: 'the broadcast stream', keyName: 'the broadcast stream\'s key',
    fails: 'Broadcasts, the node\'s reading of them and clients\' catch-ups (last_bseq) fail',
    keys: [
      { key: keys.broadcast(), expected: 'stream' },
      ...(msgId === undefined ? [] : [{ key: keys.broadcastMarker(msgId), expected: 'string' }]),
    ],
  };
}

/**
 * A channel's history stream and, for a publication sent with a `client_msg_id`, its
 * marker (src/channels/channel-stream.ts, channel-publish-4.lua).
 * @param clientMsgId the key whose marker the call reads; undefined: none
 * @throws PixiuError INVALID_REQUEST for a bad channel name (src/redis/keys.ts)
 */
export function channelKeys(channel: string, keys: Keys, clientMsgId?: string): KeyOwner {
  const name = `channel ${JSON.stringify(channel)}`;
  return {
    name, keyName: `${name}'s key`, fails: 'Publications to the channel and subscriptions to it (sub, with or without since) fail', channel,
    keys: [
      { key: keys.channelHistory(channel), expected: 'stream' },
      ...(clientMsgId === undefined ? [] : [{ key: keys.channelMarker(channel, clientMsgId), expected: 'string' }]),
    ],
  };
}

/**
 * The cause of the INTERNAL of {@link wrongTypeFailure}, for the log: its message and
 * fields name the owner (`user`, `room` or `channel`), the key(s) of the wrong type and `WRONGTYPE`.
 */
export class WrongTypeKeys extends Error {
  readonly user: string | undefined;
  readonly room: string | undefined;
  readonly channel: string | undefined;
  readonly keys: readonly WrongTypeKey[];

  /**
   * @param keys the keys whose type is not Pixiu's; when their types could not be
   *   read, every key of the owner, each with `type` undefined
   * @param reply Redis's WRONGTYPE reply
   */
  constructor(owner: KeyOwner, keys: readonly WrongTypeKey[], reply: unknown) {
    const named = keys.map((k) => (k.type === undefined ? k.key : `${k.key} (a ${k.type}, not a ${k.expected})`));
    const which = keys.some((k) => k.type === undefined) ? `one of its keys ${named.join(', ')} (their types could not be read)` : named.join(', ');
    super(`WRONGTYPE: ${owner.keyName} in Redis has another type than Pixiu writes there: ${which}. `
      + `${owner.fails} until an operator deletes or repairs it (docs/api.md, "Errors", 500)`, { cause: reply });
    this.name = 'WrongTypeKeys';
    this.user = owner.user;
    this.room = owner.room;
    this.channel = owner.channel;
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

/** True when `err` is the INTERNAL of {@link wrongTypeFailure}: a key of the wrong type, named. */
export function isWrongTypeFailure(err: unknown): err is PixiuError & { readonly cause: WrongTypeKeys } {
  return err instanceof PixiuError && err.cause instanceof WrongTypeKeys;
}

/** What the answer says of a failed call, by what the call was doing, and what to do after the repair. */
const USES = {
  /** An append to a user. */
  append: { verb: 'written', then: '. Any other recipients have the message; once it is repaired, send it again with the same client_msg_id' },
  /** A broadcast's append to the stream (its content is stored before it), or a channel publication. */
  publish: { verb: 'written', then: '. Nothing was published; once it is repaired, send it again' },
  /** A read (or an ack, or an epoch rotation). */
  read: { verb: 'read', then: '' },
  /** Anything done to a room: a membership change or listing, a room message. */
  use: { verb: 'used', then: '' },
} as const;

/** What a failed call was doing (its answer's words: {@link USES}). */
export type WrongTypeUse = keyof typeof USES;

/**
 * What a call on `owner`'s keys that Redis refused with WRONGTYPE is answered with: an
 * INTERNAL whose message names the owner and whose cause ({@link WrongTypeKeys}) names
 * the key, after reading the types of the owner's keys (one `TYPE` each; when that
 * fails, every key is named).
 * @param reply Redis's WRONGTYPE reply ({@link isWrongType})
 * @param use what the call was doing: the answer says the owner cannot be written
 *   (`append`, `publish`: then how to complete it once repaired), read, or used (a room)
 */
export async function wrongTypeFailure(redis: Redis, owner: KeyOwner, reply: unknown, use: WrongTypeUse): Promise<PixiuError> {
  const types = await Promise.all(owner.keys.map((k) => redis.type(k.key).catch(() => undefined)));
  const all = owner.keys.map((k, i): WrongTypeKey => ({ ...k, type: types[i] }));
  const wrong = all.filter((k) => k.type !== undefined && k.type !== 'none' && k.type !== k.expected);
  const named = wrong.length > 0 ? wrong : all.map((k) => ({ ...k, type: undefined }));
  const { verb, then } = USES[use];
  const what = `internal error: ${owner.name} cannot be ${verb}: a key of it in Redis holds another type `
    + '(WRONGTYPE), which an operator must delete or repair (the node\'s log names it)';
  return new PixiuError('INTERNAL', what + then, { cause: new WrongTypeKeys(owner, named, reply) });
}

/**
 * `err` as a call on `owner`'s keys is answered with: the INTERNAL of
 * {@link wrongTypeFailure} when it is Redis's `WRONGTYPE` — as the client gave it, or
 * as the cause of the UNAVAILABLE `toRedisError` made of it (a transaction's:
 * src/redis/client.ts `transaction`) — else `err` as it is.
 */
export async function namedWrongType(redis: Redis, owner: KeyOwner, err: unknown, use: WrongTypeUse): Promise<unknown> {
  const reply = err instanceof PixiuError ? err.cause : err;
  return isWrongType(reply) ? wrongTypeFailure(redis, owner, reply, use) : err;
}

/**
 * Runs `call`, a Redis call on `owner`'s keys, as `redisCall` does (src/redis/client.ts:
 * Redis's failures become UNAVAILABLE), except that Redis's `WRONGTYPE` becomes the
 * INTERNAL of {@link wrongTypeFailure} naming the owner: no retry cures it, so it is no
 * outage.
 * @throws PixiuError INTERNAL for a key of the wrong type; UNAVAILABLE when Redis fails;
 *   a script's own INVALID_REQUEST or NOT_FOUND as such
 */
export async function keysCall<T>(redis: Redis, owner: KeyOwner, use: WrongTypeUse, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw toRedisError(await namedWrongType(redis, owner, err, use));
  }
}

/**
 * {@link keysCall} for a call on `user`'s inbox keys other than an append (a read, an
 * ack, an epoch rotation): a key of the wrong type is an INTERNAL saying the user's
 * inbox cannot be read.
 * @param keys the user's inbox keys
 */
export function userKeysCall<T>(redis: Redis, user: string, keys: UserKeys, call: () => Promise<T>): Promise<T> {
  return keysCall(redis, inboxKeys(user, keys), 'read', call);
}
