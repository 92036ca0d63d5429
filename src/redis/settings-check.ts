/**
 * The start-up look at how a Redis of the operator's keeps its data (DESIGN.md §4:
 * "Redis must be configured to persist (AOF) wherever messages must survive a Redis
 * restart"; and not evict): `appendonly`, `save`, `appendfsync`, `maxmemory-policy` and
 * `maxmemory`, read with one `CONFIG GET` (config-values.ts) and warned about in
 * persistence-check.ts's words. Pixiu runs anyway (a cache-only test setup is
 * legitimate) but says so at warn, once.
 *
 * A Redis that refuses `CONFIG GET` for good (an ACL user without `+config|get`, the
 * usual `+@all -@dangerous`; CONFIG renamed away, as managed Redis services do), or
 * does not answer some of the settings, cannot be checked: the start says so once at
 * warn, naming what was not read and what to verify by hand ({@link warnSettingsUnread}),
 * where it logged two debug lines and the operator the warnings exist for never saw
 * one (walk24 M1). A failure that may pass (a timeout, a dropped connection, LOADING:
 * a node started during a Redis blip) is no such refusal: the start says it will read
 * them again, and the settings watch (settings-watch.ts) does, on its schedule, until
 * Redis answers, then warns as the start would have; it said "cannot check" for good
 * and watched nothing for the node's whole life (review35b F2). The embedded
 * `redis-server` runs with AOF on (storage/redis.conf) and is not checked.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { refusalOf, type Refusal } from './command-refusal.js';
import { configValues } from './config-values.js';
import { maxmemoryBytes, persistenceOf, warnEviction, warnPersistence, type Persistence } from './persistence-check.js';
import { cutText } from '../text-cut.js';
import { PASSING_STATE_CODES } from './state-replies.js';

/** What the start-up check read; the settings watch's starting point (settings-watch.ts). */
export interface SettingsAtStart {
  /** How Redis persists; undefined: not read. */
  readonly persistence: Persistence | undefined;
  /** `maxmemory-policy`; undefined: not read. */
  readonly policy: string | undefined;
  /** `maxmemory`, bytes (0: none); undefined when not read, then taken from the first read. */
  readonly maxmemory?: number | undefined;
  /** True when `CONFIG GET` failed in a way that may pass: nothing was read, and the check is to be made again ({@link checkSettings}). */
  readonly retry?: boolean;
}

/** The settings the start-up check reads, in one `CONFIG GET`. */
const START_SETTINGS = ['appendonly', 'save', 'appendfsync', 'maxmemory-policy', 'maxmemory'] as const;

/**
 * Reads Redis's persistence and eviction settings once and logs at warn what is unsafe
 * ({@link settingsChecked}). Never rejects.
 * @param url the Redis URL as logged (password removed)
 * @param retryMs how often the check is made again after a failure that may pass, ms
 *   (the settings watch's interval), named in the warning that says so; undefined: such
 *   a failure is not logged (a retry of the check)
 */
export async function checkSettings(redis: Redis, url: string, logger: Logger, retryMs?: number): Promise<SettingsAtStart> {
  return settingsChecked(await configValues(redis, ...START_SETTINGS), url, logger, retryMs);
}

/**
 * Logs at warn what `read` (the start-up `CONFIG GET`'s values, or its error) says is
 * unsafe: no AOF (warnPersistence), AOF written with `appendfsync no` (README "What
 * delivery promises" asks for `everysec` or `always`: with `no` the OS flushes the
 * appends when it likes, ~30 s on Linux, and a machine crash loses them: walk24 L4),
 * an evicting policy (warnEviction); what could not be read for good
 * ({@link warnSettingsUnread}); and a failure that may pass, when `retryMs` is given.
 * @param url the Redis URL as logged (password removed)
 * @param retryMs see {@link checkSettings}
 * @returns what was read; `retry` when nothing was, for a reason that may pass
 */
export function settingsChecked(read: ReadonlyMap<string, string> | Error, url: string, logger: Logger, retryMs?: number): SettingsAtStart {
  if (read instanceof Error) {
    const refusal = refusalOf(read.message);
    const said = cutText(read.message.split('\n')[0] ?? '', 200);
    if (refusal === undefined && mayPass(read)) {
      if (retryMs !== undefined) {
        logger.warn({ redis: url, reason: read.message }, `could not read how Redis persists and evicts at start (${said}): `
          + `this node reads them again every ${retryMs / 1000} s and after each reconnect, and warns then if they are unsafe (DESIGN.md §4)`);
      }
      return { persistence: undefined, policy: undefined, retry: true };
    }
    const why = refusal !== undefined ? refusedWords(refusal)
      : `this Redis answers CONFIG GET with an error (${said})`;
    warnSettingsUnread(logger, { redis: url, reason: read.message }, { persistence: true, eviction: true }, why);
    return { persistence: undefined, policy: undefined };
  }
  const persistence = persistenceOf(read.get('appendonly'), read.get('save'));
  if (persistence !== undefined) warnPersistence(logger, persistence, { redis: url });
  if (persistence === 'aof' && read.get('appendfsync') === 'no') {
    logger.warn({ redis: url, appendfsync: 'no' }, 'Redis writes its AOF without fsync (appendfsync no): the OS flushes the appends when it likes (~30 s on Linux), '
      + 'and a crash of the machine loses those, messages already acknowledged; run it with appendfsync everysec or always (DESIGN.md §4, storage/redis.conf)');
  }
  const policy = read.get('maxmemory-policy');
  if (policy !== undefined) warnEviction(logger, policy, read.get('maxmemory'), { redis: url });
  if (persistence === undefined || policy === undefined) {
    const unanswered = START_SETTINGS.filter((name) => !read.has(name));
    const why = unanswered.length > 0 ? `this Redis did not answer CONFIG GET ${unanswered.join(' ')}`
      : `this Redis answered CONFIG GET appendonly with ${JSON.stringify(cutText(read.get('appendonly') ?? '', 40))}, neither yes nor no`;
    // An appendfsync read as safe is not asked to be checked by hand (walk29 F6 nit).
    const fsyncSafe = ['everysec', 'always'].includes(read.get('appendfsync') ?? '');
    warnSettingsUnread(logger, { redis: url, unanswered }, { persistence: persistence === undefined, eviction: policy === undefined, fsyncSafe }, why);
  }
  return { persistence, policy, maxmemory: maxmemoryBytes(read.get('maxmemory')) };
}

/**
 * Redis's error replies that pass by themselves (their RESP error codes): still loading
 * its data, busy with a script, a replica that lost its primary, a key's slot moving.
 */
const PASSING_REPLIES = new RegExp(`^(${PASSING_STATE_CODES.join('|')})\\b`);

/**
 * Whether a failed `CONFIG GET` may pass if read again: no reply at all (a timeout, a
 * dropped connection: not a `ReplyError`), or one of {@link PASSING_REPLIES}. Any other
 * error reply — a proxy's `ERR unsupported command`, a managed Redis's own words for a
 * blocked CONFIG — is Redis's answer for good, like a refusal: read again every 30 s it
 * would never be, and the node would say nothing (review36-redis #1).
 */
function mayPass(err: Error): boolean {
  return err.name !== 'ReplyError' || PASSING_REPLIES.test(err.message);
}

/** Why `CONFIG GET` could not be used, in the unread-settings warning's words. */
function refusedWords(refusal: Refusal): string {
  if (refusal.kind === 'not-allowed') return 'CONFIG GET is not allowed to the ACL user of PIXIU_REDIS_URL (NOPERM; grant +config|get to have them checked)';
  if (refusal.kind === 'unknown') return 'this Redis does not know CONFIG (renamed or disabled)';
  return refusal.words;
}

/**
 * Logs at warn, once at start, that some of Redis's settings cannot be checked: its
 * persistence, its eviction or both (`unread`), why (`why`: Redis's refusal, the
 * settings it did not answer), and what to verify by hand (see the module comment).
 * @param fields the line's context (`redis`: the URL as logged, password removed; `reason`: Redis's refusal …)
 * @param unread what could not be read; `fsyncSafe`: `appendfsync` was read as
 *   `everysec` or `always`, so only `appendonly` is left to check by hand
 */
export function warnSettingsUnread(logger: Logger, fields: Record<string, unknown>, unread: { readonly persistence: boolean; readonly eviction: boolean; readonly fsyncSafe?: boolean }, why: string): void {
  const aof = unread.fsyncSafe === true ? 'appendonly yes' : 'appendonly yes, appendfsync everysec (or always)';
  const [what, settings, loses, them] = unread.persistence && unread.eviction
    ? ['persists and evicts', `${aof} and maxmemory-policy noeviction`, 'a Redis restart or eviction loses', 'them']
    : unread.persistence
      ? ['persists', unread.fsyncSafe === true ? aof : 'appendonly yes and appendfsync everysec (or always)', 'a Redis restart loses', unread.fsyncSafe === true ? 'it' : 'them']
      : ['evicts', 'maxmemory-policy noeviction', 'eviction loses', 'it'];
  logger.warn(fields, `cannot check how Redis ${what}: ${why}. Make sure by hand that it runs with ${settings}, `
    + `or ${loses} acknowledged messages; this node will not warn about ${them} (DESIGN.md §4, storage/redis.conf)`);
}
