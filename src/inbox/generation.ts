/**
 * The inbox generation (`<prefix>inbox-generation`, an integer, absent = 0): raised
 * when Redis went back in time — an unplanned failover to a replica that was behind, a
 * restore of an older snapshot — so that every inbox gets a new epoch at its next
 * append (append-13.lua step 1) and a device resuming under the old epoch is sent
 * `reset` instead of being welcomed past seqs assigned again (DESIGN.md §11;
 * docs/decisions.md "The inbox generation").
 *
 * Raised by an operator (`pixiu redis lost-writes`) or by a node that saw Redis lose a
 * write it had acknowledged to that node ({@link InboxGeneration.lostWrites}: the store
 * lease or claim, src/cluster/store-ownership.ts; or this generation itself read lower
 * than before). Each node reads it at start and at every node registry renewal (5 s)
 * and gives it to every append: the append script touches only its user's keys (one
 * Redis Cluster slot), so the generation comes as an argument, not read there.
 */
import type { Redis } from 'ioredis';
import { outageFields } from '../errors.js';
import type { Logger } from '../logger.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { evalScript } from '../redis/scripts.js';
import { INBOX_SCRIPTS } from './scripts.js';

/** What a raise did: the generation before (as read just before) and after. */
export interface GenerationRaise {
  /** The generation the raise replaced (0: none). */
  readonly before: number;
  /** The generation now in Redis. */
  readonly after: number;
  /** False when another raise came first (a compare-and-set that found another value): `after` is that one's. */
  readonly raised: boolean;
}

/**
 * The highest generation the scripts take: 15 digits (append-13.lua ARGV[9],
 * generation-raise-2.lua), exact in Lua's doubles. One above it would have every
 * append refused INVALID_REQUEST (a 4xx to producers: review1 F5).
 */
const MAX_GENERATION = 999_999_999_999_999;

/**
 * A stored generation as a number: absent is 0; undefined when unreadable — anything
 * but a decimal of at most 15 digits, i.e. set by hand (generation-raise-2.lua counts
 * such a value as 0 and a raise writes a readable one over it). Also read by
 * `pixiu inspect cluster` (cluster-view.ts).
 */
export function generationOf(text: string | null): number | undefined {
  if (text === null) return 0;
  return /^\d{1,15}$/.test(text) ? Number(text) : undefined;
}

/**
 * Runs `generation-raise-2.lua`: raises the generation to at least Redis's time in ms,
 * one past the stored one and `least`, unless it is above `expected` (another raise came
 * first; undefined: whatever it is). Below `expected` (Redis went back past a raise the
 * caller had read) it raises past `expected` too.
 * @returns the generation after the call, and whether this call raised it
 * @throws PixiuError UNAVAILABLE when Redis fails (a replica's READONLY among them)
 */
async function raiseScript(redis: Redis, keys: Keys, expected: number | undefined, least: number): Promise<{ after: number; raised: boolean }> {
  const [after, raised] = await redisCall(() => evalScript<[number, number]>(redis, INBOX_SCRIPTS.generationRaise,
    [keys.inboxGeneration()], [expected === undefined ? '' : String(expected), String(least)]));
  return { after, raised: raised === 1 };
}

/**
 * Raises the generation whatever it is (the operator's `pixiu redis lost-writes`).
 * @throws PixiuError UNAVAILABLE when Redis fails or is a read-only replica
 */
export async function raiseGeneration(redis: Redis, keys: Keys): Promise<GenerationRaise> {
  const before = generationOf(await redisCall(() => redis.get(keys.inboxGeneration()))) ?? 0;
  const { after, raised } = await raiseScript(redis, keys, undefined, 0);
  return { before, after, raised };
}

/** This node's view of the inbox generation: what its appends pass (append-13.lua ARGV[9]). */
export class InboxGeneration {
  readonly #redis: Redis;
  readonly #keys: Keys;
  readonly #logger: Logger;
  #current = 0;
  /** True once read: a lower value read after it means Redis went back. */
  #read = false;
  /** The unreadable value last logged (undefined: none since the last readable one): logged once. */
  #unreadable: string | undefined;
  /**
   * A raise owed (a loss seen, its raise failed), tried again at each {@link refresh}:
   * why, and the generation held when the loss was seen (the latest such loss's, when
   * several were), which the retry compares against as the first try did (so a raise
   * another node or the operator made since, read by the refresh that retries, is
   * taken, not raised past).
   */
  #owed: { readonly reason: string; readonly expected: number; readonly least: number } | undefined;
  /** The refresh or raise in flight: they run one at a time. */
  #busy: Promise<unknown> = Promise.resolve();

  constructor(redis: Redis, keys: Keys, logger: Logger) {
    this.#redis = redis;
    this.#keys = keys;
    this.#logger = logger;
  }

  /** The generation this node's appends pass: the last read or raised (0 before the first read). */
  get current(): number {
    return this.#current;
  }

  /**
   * Reads the generation (at start, then at every node registry renewal). A value
   * above the one held is taken (an operator or another node raised it: logged at warn
   * while the node runs; a non-zero one read at start, at info). One below it means Redis went back in time (a restore, a
   * failover to a replica behind, a FLUSHALL; nothing else lowers it): the generation is
   * raised past the one held ({@link lostWrites}). A raise owed by an earlier failure is
   * tried again. An unreadable value (set by hand: not a decimal of at most 15 digits,
   * which every append would refuse) is logged at error once and not taken: the
   * appends keep passing the one held, and a raise (owed, or the next) writes a
   * readable one over it.
   * @throws PixiuError UNAVAILABLE when Redis fails (the generation held stays)
   */
  refresh(): Promise<void> {
    return this.#serial(async () => {
      const text = await redisCall(() => this.#redis.get(this.#keys.inboxGeneration()));
      const read = generationOf(text);
      const held = this.#current;
      if (read === undefined) {
        if (text !== this.#unreadable) {
          this.#unreadable = text ?? undefined;
          this.#logger.error({ key: this.#keys.inboxGeneration(), value: text?.slice(0, 40), generation: held },
            'the inbox generation in Redis is unreadable (not a whole number of at most 15 digits: set by hand?): this node keeps passing the one it holds; '
            + 'set the key to such a number, or run pixiu redis lost-writes to write one');
        }
        await this.#payOwed();
        return;
      }
      this.#unreadable = undefined;
      if (this.#read && read < held) {
        await this.#raise(`the inbox generation in Redis went back from ${held} to ${read}`, read, held + 1);
        return;
      }
      if (this.#read && read > held) {
        this.#logger.warn({ generation: read, before: held },
          'inbox generation raised (pixiu redis lost-writes, or a node saw Redis lose writes): every inbox gets a new epoch at its next append');
      } else if (!this.#read && read > 0) {
        // At start: so an SRE who ran the command before starting the nodes (README "Redis failover") sees each took it.
        this.#logger.info({ generation: read },
          'inbox generation read at start (raised by pixiu redis lost-writes or a node that saw Redis lose writes): an inbox whose epoch predates it gets a new one at its next append');
      }
      this.#current = read;
      this.#read = true;
      // Compared with the generation held when the loss was seen, not the one just read:
      // a value above it is a raise made since (the operator's, another node's), which
      // covers that loss. Compared with the one read, every owed raise raised again: a
      // node whose raise failed as Redis came back raised a second time past the
      // operator's, one more new epoch and `reset` per user (the chaos walk's F2).
      await this.#payOwed();
    });
  }

  /**
   * Redis lost writes it had acknowledged to this node (`reason` says which): appends
   * acknowledged to producers may be gone too, and their seqs assigned again, so the
   * generation is raised past the one this node read (unless another node raised it
   * since, above that one: it is taken). A stored one below the one held is Redis gone
   * back past that raise too, and is raised past the one held, as {@link refresh} does:
   * so the lease or claim check, which runs first after a reconnect, and the read here
   * agree whichever comes first (review1 F1). A failure is logged and the raise tried
   * again at the next {@link refresh}. Never rejects.
   */
  lostWrites(reason: string): Promise<void> {
    return this.#serial(() => this.#raise(reason, this.#current, 0)).catch(() => undefined);
  }

  /** Tries again the raise owed, if any ({@link #owed}): compared as its first try was. */
  async #payOwed(): Promise<void> {
    const owed = this.#owed;
    if (owed !== undefined) await this.#raise(owed.reason, owed.expected, owed.least);
  }

  /** Raises the generation unless Redis holds one above `expected`, past `expected` and to at least `least`; logs the outcome. */
  async #raise(reason: string, expected: number, least: number): Promise<void> {
    try {
      const { after, raised } = await raiseScript(this.#redis, this.#keys, expected, least);
      this.#owed = undefined;
      // Only a raise from a hand-set 15-digit value goes past the bound: not taken (the appends would be refused).
      if (after > MAX_GENERATION) {
        this.#logger.error({ generation: after, reason },
          'the inbox generation was raised past 15 digits (from a value set by hand): this node keeps passing the one it holds; set the key lower by hand');
        return;
      }
      this.#current = after;
      this.#read = true;
      this.#logger.error({ generation: after, raisedHere: raised, reason },
        `Redis lost writes it had acknowledged (${reason}): acknowledged messages may be missing from inboxes; inbox generation ${raised ? 'raised' : 'already raised by another node'}, `
        + 'every inbox gets a new epoch at its next append and devices resuming under the old one are sent a reset');
    } catch (err) {
      // A retry that fails again keeps what is owed; a later loss, seen holding a higher
      // generation (a raise read since: the operator's, another node's), is owed past
      // that one, or a retry compared with the first loss's would take that raise as
      // covering a loss seen after it (a review's finding).
      const owed = this.#owed;
      this.#owed = owed === undefined ? { reason, expected, least }
        : { reason: owed.reason, expected: Math.max(owed.expected, expected), least: Math.max(owed.least, least) };
      this.#logger.warn({ ...outageFields(err), reason }, 'could not raise the inbox generation after Redis lost writes: tried again at the next registry renewal');
      throw err;
    }
  }

  /** Runs `fn` after whatever refresh or raise is in flight. */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#busy.then(fn, fn);
    this.#busy = run.catch(() => undefined);
    return run;
  }
}
