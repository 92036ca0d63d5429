/**
 * The start-up look at how a Redis of the operator's keeps its data
 * (settings-check.ts: AOF, eviction; DESIGN.md §4), kept up while the node runs. A
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
 * A setting CONFIG could not read at start for good (refused or renamed, as managed
 * Redis services do) is not watched, as it was not checked: the start-up said so at
 * warn (settings-check.ts `warnSettingsUnread`). When the start-up's read failed in a
 * way that may pass (a timeout, a dropped connection: `retry`), the watch makes the
 * start-up check again on the same schedule until Redis answers, warning then as the
 * start would have (review35b F2), and watches from there. A read that fails later is
 * skipped (the next one tries again); a refusal of CONFIG is logged once at debug.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { refusalOf } from './command-refusal.js';
import { configValues } from './config-values.js';
import { maxmemoryBytes, persistenceOf, warnEviction, warnPersistence, type Persistence } from './persistence-check.js';
import { checkSettings, type SettingsAtStart } from './settings-check.js';

/** How often a running node reads Redis's persistence and eviction settings again, ms. */
export const SETTINGS_WATCH_MS = 30_000;

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
  /** The start-up check is still to be made (its read failed in a way that may pass). */
  #checkPending: boolean;
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
    this.#adopt(start);
    this.#checkPending = start.retry === true;
  }

  /** Watches from now on what the start-up check (or its repeat) read. */
  #adopt(read: SettingsAtStart): void {
    this.#persistence = read.persistence;
    this.#policy = read.policy;
    this.#maxmemory = read.maxmemory;
  }

  /** Reads the settings every interval and after each reconnect, until {@link stop}; nothing when neither is watched (nor still to be checked). */
  start(): void {
    if (this.#persistence === undefined && this.#policy === undefined && !this.#checkPending) return;
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
    if (this.#checkPending) {
      await this.#checkAgain();
      return;
    }
    const values = await configValues(this.#redis, 'appendonly', 'save', 'maxmemory-policy', 'maxmemory');
    if (values instanceof Error) {
      // Redis down: the next read, or the reconnect, tries again. CONFIG refused (an ACL
      // changed, a managed Redis): said once, as the start-up says it.
      if (refusalOf(values.message) !== undefined && !this.#refusalLogged) {
        this.#refusalLogged = true;
        this.#logger.debug({ ...this.#fields, reason: values.message }, 'cannot read Redis\'s persistence and eviction settings again (CONFIG GET refused)');
      }
      return;
    }
    this.#comparePersistence(persistenceOf(values.get('appendonly'), values.get('save')));
    this.#comparePolicy(values.get('maxmemory-policy'), values.get('maxmemory'));
  }

  /** The start-up check, made again (settings-check.ts: it warns as at start); what it read is watched from now on. */
  async #checkAgain(): Promise<void> {
    const start = await checkSettings(this.#redis, this.#fields.redis, this.#logger);
    if (start.retry === true) return;
    this.#checkPending = false;
    this.#adopt(start);
    if (this.#persistence === undefined && this.#policy === undefined) this.stop();
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
