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
 * A message to many recipients is one queued call of many commands (`callEach`), each
 * built only when it is sent: queuing the appends of a 10,000-member room or a batch
 * of 100,000 recipients takes no time of its own, where building them all at once
 * held the event loop for hundreds of ms (and every connection's delivery with it).
 *
 * Calls belong to flows (one per request: `Flow`). A flow's calls go out in the order
 * queued; the flows with commands waiting take turns, one command each, so a batch of
 * 100,000 appends shares Redis with the requests that come after it instead of making
 * every one of them wait until it is done (which took 5 – 17 s on this 2-core machine:
 * every POST of the node answered when the batch did). Nothing orders two requests
 * running at once, so nothing is lost by interleaving them; within a request (a batch:
 * per recipient, in batch order, DESIGN.md §7) the one flow keeps the order.
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
 * A resend is written at once, in the order the failures come back, ahead of calls
 * queued for the next tick, so appends to one user keep their order through it: it must
 * be a plain `Command`, which never auto-pipelines (Pixiu's resends are such:
 * src/redis/scripts.ts `resendOnNoScript`). Each command keeps the client's policy: the
 * command timeout applies to it, and with the offline queue off it fails at once while
 * Redis is down.
 */
import { ReplyError, type Redis } from 'ioredis';

/** How one kind of call is sent and answered. */
export interface PipelinedCall<Args, R> {
  /**
   * Sends one call's command on `redis`; resolves with the raw reply. `flow` is the one
   * it was queued in: its commands come here in the order queued (the inbox names an
   * append's predecessor in a batch's flow here: append-chain.ts).
   */
  send(redis: Redis, args: Args, flow: Flow): Promise<unknown>;
  /** Turns the command's reply into the call's result (`args` and `flow` as sent); a throw rejects the call. */
  reply(raw: unknown, args: Args, flow: Flow): R;
  /** Turns the command's failure (error reply, timeout, connection) into the call's rejection. */
  error(err: unknown): unknown;
  /**
   * Given the failure of `send`, sends the call again another way, as a plain `Command`
   * written at once, and resolves with the raw reply (e.g. as EVAL after NOSCRIPT:
   * src/redis/scripts.ts `resendOnNoScript`), or returns undefined to fail the call.
   * Optional; only failures pay for it.
   */
  resend?(redis: Redis, args: Args, err: unknown): Promise<unknown> | undefined;
  /**
   * True when a failure breaks its flow (see `TickPipeline.#broken`): one the caller
   * retries, after which nothing later of the request may go on. Default: a failure
   * without a reply from Redis (the connection dropped, a timeout). An error reply can
   * be one too (READONLY after a failover, OOM, BUSY, LOADING, MASTERDOWN).
   */
  breaksFlow?(err: unknown): boolean;
}

/**
 * One queued call: `count` commands of one kind (one per recipient of a message, or
 * one), each built by `argsAt(i)` only when it is sent, so queuing a call costs the
 * same for one recipient as for ten thousand and the per-command work happens in the
 * bounded writes of {@link TickPipeline.#onTickEnd}. A call of one command carries its
 * `args` instead, and its promise's `resolve` and `reject`: the commonest call (a
 * message to one user) makes no closure and no result array.
 */
interface Queued<Args, R> {
  readonly count: number;
  /** The flow it was queued in. */
  readonly flow: Flow;
  /** The one command's arguments (a call of one), else undefined. */
  readonly args: Args | undefined;
  readonly argsAt: ((i: number) => Args) | undefined;
  /** Commands of this call sent (or failed before sending) so far. */
  next: number;
  /** A call of one: its promise's; a call of many: `resolve` answers the results once all are in. */
  readonly resolve: (value: unknown) => void;
  readonly reject: ((reason: unknown) => void) | undefined;
  /** A call of many: one settled result per command, and how many are still to come. */
  readonly results: PromiseSettledResult<R>[] | undefined;
  left: number;
}

/**
 * What keeps calls in order: calls of one flow are sent in the order queued; calls of
 * different flows take turns. Any object serves (e.g. `{}` per request); calls given
 * none share {@link TickPipeline.sharedFlow}.
 */
export type Flow = object;

/** The calls of one flow not wholly sent yet, oldest first from `head`. */
class FlowQueue<Args, R> {
  calls: Queued<Args, R>[] = [];
  head = 0;

  constructor(readonly flow: Flow) {}

  get empty(): boolean {
    return this.head === this.calls.length;
  }

  /** Drops the head call, wholly sent. */
  advance(): void {
    this.head += 1;
    if (this.head === this.calls.length) {
      this.calls = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.calls.length) {
      this.calls = this.calls.slice(this.head);
      this.head = 0;
    }
  }
}

/** ioredis's rejection of a command that got no reply within `commandTimeout`. */
function isTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === 'Command timed out';
}

/**
 * Batches calls of one command per tick, with a bounded number in flight.
 *
 * @typeParam Args what one command needs, handed to `send`
 * @typeParam R what one command resolves with
 */
export class TickPipeline<Args, R> {
  /** The flow of calls given none: they keep the order they were queued in. */
  static readonly sharedFlow: Flow = Object.freeze({});

  readonly #redis: Redis;
  readonly #call: PipelinedCall<Args, R>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  /** The flows with commands waiting, by flow. */
  readonly #flows = new Map<Flow, FlowQueue<Args, R>>();
  /** The same flows, in the order they take turns; {@link #turn} is next. */
  #ring: FlowQueue<Args, R>[] = [];
  #turn = 0;
  /** Commands of the queued calls not sent yet. */
  #waiting = 0;
  #inFlight = 0;
  #scheduled = false;
  /**
   * Flows (other than the shared one) a command of which failed without a reply from
   * Redis (the connection dropped, a timeout): their later commands fail too, unsent,
   * so nothing of a request goes on after a part of it failed that way. Without it, the
   * commands sent while the connection was down failed at once and those sent once it
   * was back went through: a batch's later item reached a user before its earlier one,
   * which its retry then appended after it (out of batch order).
   */
  readonly #broken = new WeakMap<Flow, unknown>();

  /**
   * @param redis the client whose connection carries the commands
   * @param call how a command is sent, and how its reply or failure is answered
   * @param maxBatch most commands in one write; a fuller tick is split
   * @param maxInFlight most commands sent and not yet answered (default 4 × maxBatch)
   */
  constructor(redis: Redis, call: PipelinedCall<Args, R>, maxBatch: number, maxInFlight = 4 * maxBatch) {
    this.#redis = redis;
    this.#call = call;
    this.#maxBatch = maxBatch;
    this.#maxInFlight = Math.max(maxBatch, maxInFlight);
  }

  /** Commands sent and not yet answered, and commands waiting to be sent (what tests check the bound with). */
  get load(): { inFlight: number; waiting: number } {
    return { inFlight: this.#inFlight, waiting: this.#waiting };
  }

  /**
   * Queues one command; it is sent when this tick ends, or once earlier commands are
   * answered when {@link load} is at the bound, after the calls queued before it in
   * its flow. Resolves with `call.reply` of the command's reply; rejects with
   * `call.error` of its failure.
   * @param flow the flow it keeps order in (default {@link sharedFlow})
   */
  call(args: Args, flow: Flow = TickPipeline.sharedFlow): Promise<R> {
    return new Promise((resolve, reject) => {
      this.#enqueue(flow, { count: 1, flow, args, argsAt: undefined, next: 0, resolve: resolve as (value: unknown) => void, reject, results: undefined, left: 1 });
    });
  }

  /**
   * Queues `count` commands as one call, in order, each built by `argsAt(i)` when it is
   * sent: what {@link call} does `count` times, without a promise per command, and
   * without building any of them now. A throw from `argsAt(i)` fails that command alone
   * (with what was thrown), unsent. Resolves, never rejects, once every command is
   * answered, with one settled result per command, in order.
   * @param flow the flow it keeps order in (default {@link sharedFlow})
   */
  callEach(count: number, argsAt: (i: number) => Args, flow: Flow = TickPipeline.sharedFlow): Promise<PromiseSettledResult<R>[]> {
    return new Promise((resolve) => {
      const results = new Array<PromiseSettledResult<R>>(count);
      if (count === 0) resolve(results);
      else this.#enqueue(flow, { count, flow, args: undefined, argsAt, next: 0, resolve: resolve as (value: unknown) => void, reject: undefined, results, left: count });
    });
  }

  /** Answers command `i` of `q`: `ok` with its result, or not with its rejection reason. */
  #settle(q: Queued<Args, R>, i: number, ok: boolean, value: unknown): void {
    const { results } = q;
    if (results === undefined) {
      if (ok) q.resolve(value);
      else q.reject?.(value);
      return;
    }
    results[i] = ok ? { status: 'fulfilled', value: value as R } : { status: 'rejected', reason: value };
    q.left -= 1;
    if (q.left === 0) q.resolve(results);
  }

  #enqueue(flow: Flow, q: Queued<Args, R>): void {
    if (this.#broken.has(flow)) {
      this.#failRest(q, this.#broken.get(flow));
      return;
    }
    let queue = this.#flows.get(flow);
    if (queue === undefined) {
      queue = new FlowQueue<Args, R>(flow);
      this.#flows.set(flow, queue);
      this.#ring.push(queue);
    }
    queue.calls.push(q);
    this.#waiting += q.count;
    this.#schedule();
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
    while (this.#ring.length > 0 && this.#inFlight < this.#maxInFlight) {
      // The stream of the moment: ioredis replaces it on reconnect, and has none before
      // its first connect (its type says otherwise).
      const stream: Redis['stream'] | undefined = this.#redis.stream;
      stream?.cork();
      let n = Math.min(this.#maxBatch, this.#maxInFlight - this.#inFlight);
      while (n > 0 && this.#ring.length > 0) {
        const q = this.#next();
        if (this.#send(q, q.next - 1)) n -= 1;
      }
      stream?.uncork();
    }
  };

  /**
   * The call whose command goes next: the head call of the flow whose turn it is; the
   * command is its `next - 1`th (counted here).
   */
  #next(): Queued<Args, R> {
    if (this.#turn >= this.#ring.length) this.#turn = 0;
    const queue = this.#ring[this.#turn] as FlowQueue<Args, R>;
    const q = queue.calls[queue.head] as Queued<Args, R>;
    q.next += 1;
    this.#waiting -= 1;
    if (q.next === q.count) queue.advance();
    if (queue.empty) {
      // Done for now: the flow leaves the ring, and the next one takes this place.
      this.#ring.splice(this.#turn, 1);
      this.#flows.delete(queue.flow);
    } else {
      this.#turn += 1;
    }
    return q;
  }

  /** Fails every command still waiting with `err` (Redis timed out: they would only wait for it). */
  #failWaiting(err: unknown): void {
    // Their requests failed part-way for want of Redis as much as the one timed out:
    // nothing later of them goes on either (see #broken).
    for (const queue of this.#ring) this.#markBroken(queue.flow, err);
    const waiting = this.#ring.flatMap((queue) => queue.calls.slice(queue.head));
    this.#flows.clear();
    this.#ring = [];
    this.#turn = 0;
    this.#waiting = 0;
    for (const q of waiting) this.#failRest(q, err);
  }

  /**
   * Fails every call queued in `flow` from now on with `err` (see {@link #broken}); the
   * shared flow is never broken. For a request that failed part-way before its appends
   * (a batch item its store or Redis refused): the calls it queued before are those of
   * its earlier items, which go on — failing them too (they were still waiting: the
   * pipeline sends when the tick ends) failed items that had nothing wrong.
   */
  breakFlow(flow: Flow, err: unknown): void {
    this.#markBroken(flow, err);
  }

  /** Marks `flow` broken with `err` (never the shared flow); false when it was not marked now. */
  #markBroken(flow: Flow, err: unknown): boolean {
    if (flow === TickPipeline.sharedFlow || this.#broken.has(flow)) return false;
    this.#broken.set(flow, err);
    return true;
  }

  /** {@link breakFlow}, and the commands of `flow` still waiting fail now too (one of its commands failed). */
  #breakFlow(flow: Flow, err: unknown): void {
    if (!this.#markBroken(flow, err)) return;
    const queue = this.#flows.get(flow);
    if (queue === undefined) return;
    this.#flows.delete(flow);
    const at = this.#ring.indexOf(queue);
    this.#ring.splice(at, 1);
    if (at < this.#turn) this.#turn -= 1;
    for (const q of queue.calls.slice(queue.head)) {
      this.#waiting -= q.count - q.next;
      this.#failRest(q, err);
    }
  }

  /** Fails the commands of `q` not sent yet with `err`. */
  #failRest(q: Queued<Args, R>, err: unknown): void {
    for (let i = q.next; i < q.count; i++) this.#settle(q, i, false, this.#call.error(err));
    q.next = q.count;
  }

  /** Sends command `i` of `q`; false when building its arguments failed it instead. */
  #send(q: Queued<Args, R>, i: number): boolean {
    let args: Args;
    if (q.argsAt === undefined) {
      args = q.args as Args;
    } else {
      try {
        args = q.argsAt(i);
      } catch (err) {
        this.#settle(q, i, false, err);
        return false;
      }
    }
    const call = this.#call;
    this.#inFlight += 1;
    const settled = (): void => {
      this.#inFlight -= 1;
      if (this.#ring.length > 0) this.#schedule();
    };
    const answer = (raw: unknown): void => {
      settled();
      let result: R;
      try {
        result = call.reply(raw, args, q.flow);
      } catch (e) {
        this.#settle(q, i, false, e);
        return;
      }
      this.#settle(q, i, true, result);
    };
    const fail = (err: unknown): void => {
      if (call.breaksFlow?.(err) ?? !(err instanceof ReplyError)) this.#breakFlow(q.flow, err);
      if (isTimeout(err)) this.#failWaiting(err);
      settled();
      this.#settle(q, i, false, call.error(err));
    };
    call.send(this.#redis, args, q.flow).then(answer, (err: unknown) => {
      const again = call.resend?.(this.#redis, args, err);
      if (again === undefined) fail(err);
      else again.then(answer, fail);
    });
    return true;
  }
}
