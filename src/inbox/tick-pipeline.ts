/**
 * Pipelining of one kind of call, per tick, with any number of commands in flight.
 *
 * Why not only ioredis auto-pipelining: it keeps ONE pipeline in flight per client and
 * queues the next one until every reply of the current one has arrived, so Redis sits
 * idle while Node handles a batch of replies and serializes the next batch. Under load
 * that held the inbox append at ~55-60 % Redis utilisation (bench/README.md, "inbox").
 *
 * Why not an ioredis `Pipeline` per tick either: building one copies every script
 * defined on the client onto it, and at one or a few calls per tick (single-message
 * POSTs) those objects were half of what the server promoted to V8's old generation,
 * which sets how often its full collections pause the event loop (bench/README.md,
 * "e2e"). Here the calls of one tick are sent as plain commands on the client, with its
 * socket corked meanwhile, so they still leave in one write (one round trip for many
 * recipients); a tick of more than `maxBatch` calls is written in chunks of that many,
 * so Redis can start on the first while Node builds the next. Replies come back in
 * order on the one connection, whatever is still in flight.
 *
 * `call.command`, the registered command a failed call may be sent again with
 * (`resend`), is excluded from auto-pipelining (`excludeFromAutoPipelining`): a resend
 * is then written at once, in the order the failures come back, ahead of calls queued
 * for the next tick, so appends to one user keep their order through it. Each command
 * keeps the client's policy: the command timeout applies to it, and with the offline
 * queue off it fails at once while Redis is down.
 */
import type { Redis } from 'ioredis';
import { excludeFromAutoPipelining } from '../redis/client.js';

/** How one kind of call is sent and answered. */
export interface PipelinedCall<Args, R> {
  /** The registered ioredis command `resend` uses (e.g. a script's name given to `defineCommand`). */
  readonly command: string;
  /** Sends one call's command on `redis`; resolves with the raw reply. */
  send(redis: Redis, args: Args): Promise<unknown>;
  /** Turns the command's reply into the call's result; a throw rejects the call. */
  reply(raw: unknown): R;
  /** Turns the command's failure (error reply, timeout, connection) into the call's rejection. */
  error(err: unknown): unknown;
  /**
   * Given the failure of `send`, sends the call again another way and resolves with the
   * raw reply (e.g. as EVAL after NOSCRIPT), or returns undefined to fail the call.
   * Optional; only failures pay for it.
   */
  resend?(redis: Redis, args: Args, err: unknown): Promise<unknown> | undefined;
}

interface Queued<Args, R> {
  readonly args: Args;
  readonly resolve: (result: R) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Batches calls of one command per tick.
 *
 * @typeParam Args what one call needs, handed to `send`
 * @typeParam R what one call resolves with
 */
export class TickPipeline<Args, R> {
  readonly #redis: Redis;
  readonly #call: PipelinedCall<Args, R>;
  readonly #maxBatch: number;
  #queued: Queued<Args, R>[] = [];

  /**
   * @param redis the client whose connection carries the commands
   * @param call how a call is sent, and how its reply or failure is answered
   * @param maxBatch most commands in one write; a fuller tick is split
   */
  constructor(redis: Redis, call: PipelinedCall<Args, R>, maxBatch: number) {
    this.#redis = redis;
    this.#call = call;
    this.#maxBatch = maxBatch;
    excludeFromAutoPipelining(redis, call.command);
  }

  /**
   * Queues one call; it is sent when this tick ends. Resolves with `call.reply` of the
   * command's reply; rejects with `call.error` of its failure.
   */
  call(args: Args): Promise<R> {
    return new Promise((resolve, reject) => {
      // setImmediate, as ioredis auto-pipelining does: calls made by I/O callbacks
      // already queued in this turn of the event loop join the same write.
      if (this.#queued.length === 0) setImmediate(this.#onTickEnd);
      this.#queued.push({ args, resolve, reject });
    });
  }

  readonly #onTickEnd = (): void => {
    const queued = this.#queued;
    this.#queued = [];
    for (let from = 0; from < queued.length; from += this.#maxBatch) {
      // The stream of the moment: ioredis replaces it on reconnect, and has none before
      // its first connect (its type says otherwise).
      const stream: Redis['stream'] | undefined = this.#redis.stream;
      stream?.cork();
      const to = Math.min(queued.length, from + this.#maxBatch);
      for (let i = from; i < to; i++) this.#send(queued[i] as Queued<Args, R>);
      stream?.uncork();
    }
  };

  #send(q: Queued<Args, R>): void {
    const call = this.#call;
    const answer = (raw: unknown): void => {
      let result: R;
      try {
        result = call.reply(raw);
      } catch (e) {
        q.reject(e);
        return;
      }
      q.resolve(result);
    };
    const fail = (err: unknown): void => q.reject(call.error(err));
    call.send(this.#redis, q.args).then(answer, (err: unknown) => {
      const again = call.resend?.(this.#redis, q.args, err);
      if (again === undefined) fail(err);
      else again.then(answer, fail);
    });
  }
}
