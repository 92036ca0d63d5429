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

interface Waiter {
  readonly resolve: (reply: unknown) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Batches calls of one command into pipelines.
 *
 * @typeParam Args what one call needs, handed to `add`
 */
export class TickPipeline<Args> {
  readonly #redis: Redis;
  readonly #add: (pipeline: ChainableCommander, args: Args) => void;
  readonly #maxBatch: number;
  #pipeline: ChainableCommander | undefined;
  #waiters: Waiter[] = [];
  #scheduled = false;

  /**
   * @param redis the client whose connection carries the pipelines
   * @param add queues one call's command on a pipeline
   * @param maxBatch most calls in one pipeline; a fuller tick is split
   */
  constructor(redis: Redis, add: (pipeline: ChainableCommander, args: Args) => void, maxBatch: number) {
    this.#redis = redis;
    this.#add = add;
    this.#maxBatch = maxBatch;
  }

  /**
   * Queues one call; it is sent when this tick ends (or at once when the batch is full).
   * Resolves with the command's raw reply, rejects with its error (unmapped).
   */
  call(args: Args): Promise<unknown> {
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
      this.#add(pipeline, args);
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
    pipeline.exec().then(
      (results) => {
        for (let i = 0; i < waiters.length; i++) {
          const [err, reply] = results?.[i] ?? [new Error('pipeline returned no reply'), null];
          if (err) waiters[i]?.reject(err);
          else waiters[i]?.resolve(reply);
        }
      },
      (err: unknown) => {
        for (const w of waiters) w.reject(err);
      },
    );
  }
}
