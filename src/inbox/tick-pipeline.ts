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
 * At most `maxInFlight` commands are in flight; the others wait here, in order, and go
 * out as replies come back. A command's timeout (ioredis `commandTimeout`) starts when
 * it is sent, so it measures Redis, not this process's own backlog: a batch of 100,000
 * appends used to send them all at once, and the last ones timed out while Redis was
 * still working through the first (answered 503 though Redis appended them), with
 * hundreds of MB of commands held meanwhile and the event loop stalled building them.
 * When a command does time out (Redis hung), the calls still waiting here fail at once
 * with that error instead of each waiting for a timeout of its own.
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

/** ioredis's rejection of a command that got no reply within `commandTimeout`. */
function isTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === 'Command timed out';
}

/**
 * Batches calls of one command per tick, with a bounded number in flight.
 *
 * @typeParam Args what one call needs, handed to `send`
 * @typeParam R what one call resolves with
 */
export class TickPipeline<Args, R> {
  readonly #redis: Redis;
  readonly #call: PipelinedCall<Args, R>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  /** Calls not sent yet, oldest first from {@link #head}. */
  #queue: Queued<Args, R>[] = [];
  #head = 0;
  #inFlight = 0;
  #scheduled = false;

  /**
   * @param redis the client whose connection carries the commands
   * @param call how a call is sent, and how its reply or failure is answered
   * @param maxBatch most commands in one write; a fuller tick is split
   * @param maxInFlight most commands sent and not yet answered (default 4 × maxBatch)
   */
  constructor(redis: Redis, call: PipelinedCall<Args, R>, maxBatch: number, maxInFlight = 4 * maxBatch) {
    this.#redis = redis;
    this.#call = call;
    this.#maxBatch = maxBatch;
    this.#maxInFlight = Math.max(maxBatch, maxInFlight);
    excludeFromAutoPipelining(redis, call.command);
  }

  /** Calls sent and not yet answered, and calls waiting to be sent (what tests check the bound with). */
  get load(): { inFlight: number; waiting: number } {
    return { inFlight: this.#inFlight, waiting: this.#queue.length - this.#head };
  }

  /**
   * Queues one call; it is sent when this tick ends, or once earlier calls are answered
   * when {@link load} is at the bound. Resolves with `call.reply` of the command's
   * reply; rejects with `call.error` of its failure.
   */
  call(args: Args): Promise<R> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ args, resolve, reject });
      this.#schedule();
    });
  }

  /**
   * setImmediate, as ioredis auto-pipelining does: calls made by I/O callbacks already
   * queued in this turn of the event loop join the same write.
   */
  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#onTickEnd);
  }

  readonly #onTickEnd = (): void => {
    this.#scheduled = false;
    while (this.#head < this.#queue.length && this.#inFlight < this.#maxInFlight) {
      // The stream of the moment: ioredis replaces it on reconnect, and has none before
      // its first connect (its type says otherwise).
      const stream: Redis['stream'] | undefined = this.#redis.stream;
      stream?.cork();
      const n = Math.min(this.#maxBatch, this.#maxInFlight - this.#inFlight, this.#queue.length - this.#head);
      for (let i = 0; i < n; i++) this.#send(this.#take());
      stream?.uncork();
    }
  };

  /** The oldest waiting call (there is one). */
  #take(): Queued<Args, R> {
    const q = this.#queue[this.#head] as Queued<Args, R>;
    this.#head += 1;
    if (this.#head === this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    return q;
  }

  /** Fails every call still waiting with `err` (Redis timed out: they would only wait for it). */
  #failWaiting(err: unknown): void {
    const waiting = this.#queue.slice(this.#head);
    this.#queue = [];
    this.#head = 0;
    for (const q of waiting) q.reject(this.#call.error(err));
  }

  #send(q: Queued<Args, R>): void {
    const call = this.#call;
    this.#inFlight += 1;
    const settled = (): void => {
      this.#inFlight -= 1;
      if (this.#head < this.#queue.length) this.#schedule();
    };
    const answer = (raw: unknown): void => {
      settled();
      let result: R;
      try {
        result = call.reply(raw);
      } catch (e) {
        q.reject(e);
        return;
      }
      q.resolve(result);
    };
    const fail = (err: unknown): void => {
      if (isTimeout(err)) this.#failWaiting(err);
      settled();
      q.reject(call.error(err));
    };
    call.send(this.#redis, q.args).then(answer, (err: unknown) => {
      const again = call.resend?.(this.#redis, q.args, err);
      if (again === undefined) fail(err);
      else again.then(answer, fail);
    });
  }
}
