/**
 * The start-up look at how a Redis of the operator's keeps its data
 * (persistence-check.ts: AOF, eviction; DESIGN.md §4), kept up while the node runs. A
 * setting changed at runtime — `CONFIG SET appendonly no`, `CONFIG SET
 * maxmemory-policy allkeys-lru`, a configuration-management run, a Redis restarted
 * with another configuration — went unnoticed until keys were gone (a black-box SRE's
 * finding). So the settings are read again every {@link SETTINGS_WATCH_MS} and after
 * each reconnect (a restarted Redis), with one `CONFIG GET` of four parameters, and a
 * change is logged once: at warn, in the start-up warning's words, when Redis stops
 * persisting with AOF or starts to evict, with `changedFrom`; at info when it is back.
 * Under an evicting policy, a `maxmemory` set where there was none (0) is such a change
 * too, warned about once each time (`changedFrom: 'maxmemory 0'`): it is the moment the
 * start-up warning ("once a maxmemory is set (none is now)") said eviction begins, and
 * a `CONFIG SET maxmemory` under `allkeys-lru` went unsaid until keys were evicted
 * (walk13). Other changes of `maxmemory` alone are not.
 *
 * A setting CONFIG could not read at start (refused or renamed, as managed Redis
 * services do) is not watched, as it was not checked: the start-up said so at warn
 * (persistence-check.ts `warnSettingsUnread`). A read that fails later is skipped (the next one tries again); a refusal of
 * CONFIG is logged once at debug.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { maxmemoryBytes, persistenceOf, warnEviction, warnPersistence, type Persistence } from './persistence-check.js';

/** How often a running node reads Redis's persistence and eviction settings again, ms. */
export const SETTINGS_WATCH_MS = 30_000;

/** What the start-up read (persistence-check.ts); undefined: CONFIG could not be used, not watched. */
export interface SettingsAtStart {
  readonly persistence: Persistence | undefined;
  readonly policy: string | undefined;
  /** `maxmemory`, bytes (0: none); undefined when not read, then taken from the first read. */
  readonly maxmemory?: number | undefined;
}

/** The watch of one Redis's settings (see the module comment). */
export class RedisSettingsWatch {
  readonly #redis: Redis;
  readonly #logger: Logger;
  /** The line's context: the Redis URL as logged (password removed). */
  readonly #fields: { readonly redis: string };
  readonly #intervalMs: number;
  #persistence: Persistence | undefined;
  #policy: string | undefined;
  #maxmemory: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  #refusalLogged = false;
  readonly #onReady = (): void => void this.checkNow();

  /**
   * @param url the Redis URL as logged (password removed)
   * @param start what the start-up read, and warned about
   * @param intervalMs between two reads, ms; default {@link SETTINGS_WATCH_MS}
   */
  constructor(redis: Redis, url: string, logger: Logger, start: SettingsAtStart, intervalMs = SETTINGS_WATCH_MS) {
    this.#redis = redis;
    this.#logger = logger;
    this.#fields = { redis: url };
    this.#intervalMs = intervalMs;
    this.#persistence = start.persistence;
    this.#policy = start.policy;
    this.#maxmemory = start.maxmemory;
  }

  /** Reads the settings every interval and after each reconnect, until {@link stop}; nothing when neither is watched. */
  start(): void {
    if (this.#persistence === undefined && this.#policy === undefined) return;
    this.#timer = setInterval(this.#onReady, this.#intervalMs);
    this.#timer.unref();
    this.#redis.on('ready', this.#onReady);
  }

  /** Stops reading. Idempotent. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#redis.off('ready', this.#onReady);
  }

  /** Reads the settings now (one read at a time: a call during one waits for it) and logs what changed. Never rejects. */
  checkNow(): Promise<void> {
    this.#reading ??= this.#read().finally(() => { this.#reading = undefined; });
    return this.#reading;
  }

  async #read(): Promise<void> {
    let values: Map<string, string>;
    try {
      const reply = await this.#redis.config('GET', 'appendonly', 'save', 'maxmemory-policy', 'maxmemory') as string[];
      values = new Map(reply.flatMap((v, i) => (i % 2 === 0 ? [[v, reply[i + 1] ?? ''] as const] : [])));
    } catch (err) {
      // Redis down: the next read, or the reconnect, tries again. CONFIG refused (an ACL
      // changed, a managed Redis): said once, as the start-up says it.
      if ((err as Error).name === 'ReplyError' && !this.#refusalLogged) {
        this.#refusalLogged = true;
        this.#logger.debug({ ...this.#fields, reason: (err as Error).message }, 'cannot read Redis\'s persistence and eviction settings again (CONFIG GET refused)');
      }
      return;
    }
    this.#comparePersistence(persistenceOf(values.get('appendonly'), values.get('save')));
    this.#comparePolicy(values.get('maxmemory-policy'), values.get('maxmemory'));
  }

  #comparePersistence(now: Persistence | undefined): void {
    const before = this.#persistence;
    if (before === undefined || now === undefined || now === before) return;
    this.#persistence = now;
    if (now === 'aof') this.#logger.info({ ...this.#fields, appendonly: 'yes', changedFrom: before }, 'Redis persists with AOF again (appendonly yes)');
    else warnPersistence(this.#logger, now, { ...this.#fields, changedFrom: before });
  }

  #comparePolicy(now: string | undefined, maxmemory: string | undefined): void {
    const before = this.#policy;
    if (before === undefined || now === undefined) return;
    const limitBefore = this.#maxmemory;
    const limit = maxmemoryBytes(maxmemory);
    if (limit !== undefined) this.#maxmemory = limit;
    if (now === before) {
      // The same evicting policy, a limit set where there was none: eviction begins now
      // (warnEviction says nothing for noeviction). (A policy changed in the same read is
      // warned about below, with the limit.)
      if (limitBefore === 0 && limit !== undefined && limit > 0) {
        warnEviction(this.#logger, now, maxmemory, { ...this.#fields, changedFrom: 'maxmemory 0' });
      }
      return;
    }
    this.#policy = now;
    if (now === 'noeviction') this.#logger.info({ ...this.#fields, maxmemoryPolicy: now, changedFrom: before }, 'Redis no longer evicts keys (maxmemory-policy noeviction)');
    else warnEviction(this.#logger, now, maxmemory, { ...this.#fields, changedFrom: before });
  }
}
