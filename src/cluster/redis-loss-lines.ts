/**
 * The error lines of a store whose claim Redis lost (docs/decisions.md, "Redis without
 * the store's claim"): what is gone and what devices see, and, for a loss found while
 * the node runs, its likely cause — eviction when Redis says it evicted keys, else a
 * FLUSHALL, a Redis that came back empty or a snapshot older than the store
 * (src/cluster/store-ownership.ts logs them).
 */
import type { Logger } from '../logger.js';
import type { EvictionSign } from '../redis/persistence-check.js';

/**
 * The error logged when Redis does not know a store that has a block: what was lost
 * and what devices see (docs/decisions.md, "Redis without the store's claim").
 */
export const FORGOTTEN_EFFECTS = 'inboxes and their epochs, ack cursors and room members kept in Redis are not there: '
  + 'the messages this data dir stored are in no inbox on it (GET /v1/messages/{id} still reads them), a device resuming with last_seq is sent a reset, '
  + 'one without starts on an empty inbox';

/**
 * Logs at error that Redis lost a store's claim while its node ran: by eviction when
 * `evictions` says Redis has evicted keys (read now, once per loss found, never on a
 * request's path), else by a FLUSHALL, a Redis that came back empty or an older snapshot. Never rejects.
 * @param fields the line's context (`store`, `redis`)
 * @param evictions src/redis/persistence-check.ts `evictionSign` on the node's Redis; none: not asked
 */
export function logLostWhileRunning(logger: Logger, fields: Record<string, unknown>, evictions?: () => Promise<EvictionSign | undefined>): void {
  void (evictions?.() ?? Promise.resolve(undefined)).then((sign) => {
    if (sign === undefined) {
      logger.error(fields, `Redis lost its data while this node ran (this store's claim was gone: a FLUSHALL, a Redis that came back empty, or a snapshot older than this store); ${FORGOTTEN_EFFECTS}; connected devices are sent a reset`);
      return;
    }
    logger.error({ ...fields, evictedKeys: sign.evictedKeys, maxmemoryPolicy: sign.policy ?? null },
      'Redis evicted keys while this node ran (this store\'s claim was gone, and Redis reports keys evicted: evictedKeys, under maxmemoryPolicy; '
      + 'eviction drops keys at random once Redis reaches maxmemory): some inboxes and their epochs, ack cursors and room members kept in Redis may be gone with it, '
      + 'and the claims of stopped nodes\' stores, whose blocks a new data dir may then take; connected devices are sent a reset; '
      + 'run Redis with maxmemory-policy noeviction (a full Redis then refuses writes, and nothing acknowledged is lost)');
  });
}
