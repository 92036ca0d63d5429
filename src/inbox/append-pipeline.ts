/**
 * The pipeline every inbox append goes out on (`append-13.lua`, DESIGN.md §4; the
 * pipeline itself: tick-pipeline.ts), and the one way an append's EVALSHA is built, for
 * a single append and for those of a message to many users alike (src/inbox/inbox.ts).
 */
import { ReplyError, type Redis } from 'ioredis';
import { toRedisError } from '../redis/client.js';
import type { UserKeys } from '../redis/keys.js';
import { resendOnNoScript, sendEvalsha } from '../redis/scripts.js';
import { redisStateReason } from '../redis/state-replies.js';
import { newEpoch, toAppendResult, type AppendResult, type ExpiresArgs } from './codec.js';
import { APPEND_AT, APPEND_KEYS, APPEND_SHA, INBOX_SCRIPTS, type AppendArgv } from './scripts.js';
import { AppendChain } from './append-chain.js';
import { TickPipeline } from './tick-pipeline.js';
import { isWrongType, wrongTypeReply } from '../redis/wrong-type.js';

/**
 * Most appends in one pipeline: a bounded batch lets Redis start on it while Node still
 * builds the next. Batches of 250 to 1,000 all kept Redis ~90 % busy in bench/inbox.ts.
 */
const MAX_APPEND_BATCH = 500;

/**
 * The append pipeline of one Redis client: EVALSHA sent as a plain command, sent again
 * as a plain EVAL when the script is not loaded; in a batch's ordered flow each append
 * names the one before it to the same user that has no answer yet (append-chain.ts).
 * Replies are read by codec.ts `toAppendResult`; a wrong-type key of the user's is not
 * an outage (wrong-type.ts); a Redis state reply breaks the flow as a lost connection.
 */
export function appendPipeline(redis: Redis): TickPipeline<AppendArgv, AppendResult> {
  return new TickPipeline<AppendArgv, AppendResult>(redis, {
    // EVALSHA as a plain command (scripts.ts `sendEvalsha`); when the script is not
    // loaded, sent again as a plain EVAL, which loads it (scripts.ts `resendOnNoScript`).
    // In a batch's flow, naming the append before it to the same user that has no
    // answer yet, and forgetting that one once it is done (append-chain.ts).
    send: (client, argv, flow) => {
      if (flow instanceof AppendChain) argv[APPEND_AT.earlier] = flow.sending(argv[APPEND_AT.inbox], argv[APPEND_AT.msgId]);
      return sendEvalsha(client, argv);
    },
    resend: (client, argv, err) => resendOnNoScript(client, INBOX_SCRIPTS.append, argv, err),
    reply: (raw, argv, flow) => {
      const result = toAppendResult(raw);
      if (flow instanceof AppendChain) flow.done(argv[APPEND_AT.inbox], argv[APPEND_AT.msgId]);
      return result;
    },
    // A key of the user's of another type: not an outage, and no retry cures it (wrong-type.ts).
    error: (err) => (isWrongType(err) ? wrongTypeReply(err) : toRedisError(err)),
    // As a dropped connection: an error reply saying Redis cannot take writes now (a
    // failover's READONLY, OOM, a busy script, …), which later appends may pass once
    // it can. Not one about the user's keys (WRONGTYPE): every retry fails it again.
    // Nor EARLIER_MISSING: the earlier append's failure broke the flow if it was to.
    breaksFlow: (err) => !(err instanceof ReplyError) || redisStateReason(err) !== undefined,
  }, MAX_APPEND_BATCH);
}

/** What one inbox puts in every append's EVALSHA besides the user and the message: `append-13.lua` ARGV 3, 8, 9 and 11, and its clock. */
export interface AppendSettings {
  /** The inbox cap, ARGV[3]. */
  readonly cap: string;
  /** The retention grace, ms, ARGV[8]. */
  readonly grace: string;
  /** Now, ms since the Unix epoch (ARGV[5]). */
  readonly now: () => number;
  /** The inbox generation the node holds now (ARGV[9], src/inbox/generation.ts). */
  readonly generation: () => number;
  /** Most devices with an ack cursor per user, ARGV[11] (`PIXIU_MAX_DEVICE_CURSORS`). */
  readonly deviceCursors: string;
}

/**
 * The EVALSHA of one append of `msgId` to the user of `keys` (scripts.ts AppendArgs),
 * with a fresh epoch for an inbox that has none and no earlier MsgID (an ordered flow
 * sets it as the append is sent).
 * @param kindArg the kind as the script takes it (codec.ts KIND_ARG)
 * @param room the room id, "" for none
 * @param expires when the content expires, ms, as codec.ts `expiresArgs` gives it: for the
 *   keys' retention and the entry's `exp`
 */
export function appendArgv(keys: UserKeys, msgId: string, kindArg: string, room: string, expires: ExpiresArgs, settings: AppendSettings): AppendArgv {
  return [
    APPEND_SHA, APPEND_KEYS, keys.inbox, keys.meta, keys.ids, keys.conns, keys.acks,
    msgId, kindArg, settings.cap, newEpoch(), String(settings.now()), room, expires.keep, settings.grace,
    String(settings.generation()), '', settings.deviceCursors, expires.entry,
  ];
}
