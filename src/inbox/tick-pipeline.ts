/**
 * Pipelining of one kind of call, per tick, with several pipelines in flight.
 *
 * Why not only ioredis auto-pipelining: it keeps ONE pipeline in flight per client and
 * queues the next one until every reply of the current one has arrived, so Redis sits
 * idle while Node handles a batch of replies and serializes the next batch. Under load
 * that held the inbox append at ~55-60 % Redis utilisation (bench/README.md, "inbox").
 * Here calls made in one tick still share one pipeline (one round trip for many
 * recipients), but a pipeline is sent as soon as the tick ends or it holds `maxBatch`
 * calls, whatever is still in flight; Redis runs them in order on the one connection.
 *
 * Each command keeps the client's policy: the command timeout applies to it, and with
 * the offline queue off it fails at once while Redis is down.
 */
import type { ChainableCommander, Redis } from 'ioredis';

/** How one kind of call is sent and answered. */
export interface PipelinedCall<Args, R> {
  /** Queues one call's command on a pipeline. */
  add(pipeline: ChainableCommander, args: Args): void;
  /** Turns the command's reply into the call's result; a throw rejects the call. */
  reply(raw: unknown): R;
  /** Turns the command's failure (error reply, timeout, connection) into the call's rejection. */
  error(err: unknown): unknown;
}

interface Waiter<R> {
  readonly resolve: (result: R) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Batches calls of one command into pipelines.
 *
 * @typeParam Args what one call needs, handed to `add`
 * @typeParam R what one call resolves with
 */
export class TickPipeline<Args, R> {
  readonly #redis: Redis;
  readonly #call: PipelinedCall<Args, R>;
  readonly #maxBatch: number;
  #pipeline: ChainableCommander | undefined;
  #waiters: Waiter<R>[] = [];
  #scheduled = false;

  /**
   * @param redis the client whose connection carries the pipelines
   * @param call how a call is queued, and how its reply or failure is answered
   * @param maxBatch most calls in one pipeline; a fuller tick is split
   */
  constructor(redis: Redis, call: PipelinedCall<Args, R>, maxBatch: number) {
    this.#redis = redis;
    this.#call = call;
    this.#maxBatch = maxBatch;
  }

  /**
   * Queues one call; it is sent when this tick ends (or at once when the batch is full).
   * Resolves with `call.reply` of the command's reply; rejects with `call.error` of its
   * failure. The reply is mapped here, as the pipeline's replies are handed out, so a
   * call costs one promise, not a chain of them.
   */
  call(args: Args): Promise<R> {
    return new Promise((resolve, reject) => {
      let pipeline = this.#pipeline;
      if (pipeline === undefined) {
        pipeline = this.#redis.pipeline();
        this.#pipeline = pipeline;
        if (!this.#scheduled) {
          this.#scheduled = true;
          // setImmediate, as ioredis does: calls made by I/O callbacks already queued in
          // this turn of the event loop join the same pipeline.
          setImmediate(this.#onTickEnd);
        }
      }
      this.#call.add(pipeline, args);
      this.#waiters.push({ resolve, reject });
      if (this.#waiters.length >= this.#maxBatch) this.#flush();
    });
  }

  readonly #onTickEnd = (): void => {
    this.#scheduled = false;
    this.#flush();
  };

  #flush(): void {
    const pipeline = this.#pipeline;
    if (pipeline === undefined) return;
    const waiters = this.#waiters;
    this.#pipeline = undefined;
    this.#waiters = [];
    const call = this.#call;
    pipeline.exec().then(
      (results) => {
        for (let i = 0; i < waiters.length; i++) {
          const w = waiters[i] as Waiter<R>;
          const [err, raw] = results?.[i] ?? [new Error('pipeline returned no reply'), null];
          if (err) {
            w.reject(call.error(err));
            continue;
          }
          let result: R;
          try {
            result = call.reply(raw);
          } catch (e) {
            w.reject(e);
            continue;
          }
          w.resolve(result);
        }
      },
      (err: unknown) => {
        for (const w of waiters) w.reject(call.error(err));
      },
    );
  }
}
