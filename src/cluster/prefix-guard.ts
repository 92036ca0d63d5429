/**
 * A data dir started on a shared Redis under another key prefix than the one it last
 * ran with there (DESIGN.md §4, §9; docs/decisions.md, "Several nodes"). Every key a
 * node uses — inboxes, registrations, claims, leases — is under its prefix, so a node
 * with prefix Q beside nodes with prefix P on one Redis is a second cluster: it
 * answers 201 to messages whose inbox entries are under Q, where no node of P and no
 * client of theirs looks, and the nodes of P cannot read the records this data dir
 * stored for them (its lease is under P). An operator's typo did just that for 25 s,
 * with one error line at start and `/readyz` 200 (a black-box SRE's finding).
 *
 * So the prefix of the last start on a shared Redis is kept in the store's LAYOUT file
 * (src/store/layout.ts `redisPrefix`), and a start with another prefix is refused
 * while this Redis knows the store under the recorded prefix (its description, written
 * by its claim: the data dir ran on this Redis) and nodes of another data dir are
 * registered under that prefix. Otherwise the start goes on as before — every node of
 * P stopped; Redis lost its data; another Redis, where an unrelated cluster may use P
 * too (the default prefix): the store ownership's `checkKnown` logs at error that this
 * Redis does not know the store, and the new prefix is recorded.
 */
import path from 'node:path';
import type { Redis } from 'ioredis';
import { StartupError } from '../errors.js';
import { redisCall, redisNowMs } from '../redis/client.js';
import { Keys } from '../redis/keys.js';
import type { FoundLayout } from '../store/layout.js';
import { PartitionClaims } from './partition-claims.js';
import { storeOf } from './shared-settings.js';

/** What {@link refuseClusterSplit} checks. */
export interface PrefixGuardOptions {
  /** The data dir (for the message). */
  readonly dataDir: string;
  /** Its store's layout, as the start read it (src/store/layout.ts `refuseUnreadableStore`). */
  readonly layout: FoundLayout;
  /** The key prefix this start uses (`PIXIU_REDIS_PREFIX`). */
  readonly prefix: string;
  /** The database this start uses (the URL's `/N`). */
  readonly db: number;
  /** The Redis as the operator named it, without its password (for the message). */
  readonly redisUrl: string;
}

/**
 * The nodes registered under `prefix` on this Redis now (node-registry.ts: a sorted
 * set of node id → expiry by Redis's clock), less those whose shared-settings entry
 * names `storeId` — this data dir's own node, killed moments ago, whose registration
 * has not lapsed yet, is no other node.
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function liveNodesUnder(redis: Redis, prefix: string, storeId: string | undefined): Promise<string[]> {
  const keys = new Keys(prefix);
  const now = await redisNowMs(redis);
  const [live, settings] = await redisCall(() => Promise.all([
    redis.zrangebyscore(keys.nodes(), `(${now}`, '+inf'),
    redis.hgetall(keys.nodeSettings()),
  ]));
  return live.filter((node) => storeId === undefined || storeOf(settings[node]) !== storeId).sort();
}

/**
 * The refusal of a start with key prefix `prefix` on a data dir that last ran with
 * `recorded`, while `nodes` run under `recorded`.
 */
export function prefixSplitRefusal(dataDir: string, recorded: string, prefix: string, nodes: readonly string[], redisUrl: string): string {
  const named = `${nodes.length === 1 ? 'node' : 'nodes'} ${nodes.join(', ')}`;
  return `the data dir ${dataDir} last ran with PIXIU_REDIS_PREFIX "${recorded}" on this Redis (${redisUrl}), where ${named} ${nodes.length === 1 ? 'runs' : 'run'} under it now `
    + '(a node killed counts as running until its registration lapses, within 15 s), '
    + `and is started with PIXIU_REDIS_PREFIX "${prefix}": it would answer 201 to messages that the nodes under "${recorded}" and their clients never see `
    + `(its inboxes would be under "${prefix}"), and they could not read the messages it stored for them. Start it with PIXIU_REDIS_PREFIX=${recorded} to serve with them. `
    + `To move this data dir to "${prefix}" on purpose, stop the nodes under "${recorded}" first (the messages it stored are then in no inbox under "${prefix}"); `
    + `to start a node under "${prefix}" beside them, give it a new data dir (docs/decisions.md, "Several nodes")`;
}

/**
 * The error line of a start that moved a data dir that stored messages from key prefix
 * `recorded` to `prefix` on the same Redis, when the store ownership's unknown-store
 * line did not already say it (the store's claim is known under `prefix` from an
 * earlier move): the messages stored while it ran under `recorded` are in inboxes
 * under `recorded` only.
 */
export function prefixMoveLine(recorded: string, prefix: string): string {
  return `this data dir last ran with PIXIU_REDIS_PREFIX "${recorded}" and now runs with "${prefix}": the messages it stored under "${recorded}" `
    + `are in inboxes under "${recorded}" only, which no node or client under "${prefix}" reads (GET /v1/messages/{id} still reads them)`;
}

/**
 * Refuses a start on a Redis of its own (no `PIXIU_REDIS_URL`: the embedded
 * redis-server) of a data dir that last ran on a shared Redis (its LAYOUT records the
 * prefix of that start): the URL was most likely left out by mistake (an environment
 * file not loaded), and the node would be an island — answering 201 to messages that
 * no other node or its clients see, with its lease gone from the shared Redis, so the
 * other nodes stall on every message it stored for their users (a black-box SRE's
 * finding: one error line, `/readyz` 200). Run before the embedded Redis is started.
 * To move such a data dir to a Redis of its own on purpose, the message says how.
 * @param found its store's layout, as the start read it (src/store/layout.ts `refuseUnreadableStore`)
 * @throws StartupError naming the recorded prefix and what to do
 */
export function refuseEmbeddedAfterShared(dataDir: string, found: FoundLayout): void {
  const recorded = found.layout?.redisPrefix;
  if (recorded === undefined) return;
  throw new StartupError(`the data dir ${dataDir} last ran on the Redis of PIXIU_REDIS_URL (key prefix "${recorded}") and is started without PIXIU_REDIS_URL, `
    + 'which would start a redis-server of its own: its inboxes are on that Redis, not there, so it would answer 201 to messages that no other node and none of their clients see, '
    + 'and the nodes on that Redis could not read the messages it stored for them. '
    + `Set PIXIU_REDIS_URL to that Redis (and PIXIU_REDIS_PREFIX to "${recorded}") — was the environment file left out? `
    + `To run this data dir on a Redis of its own from now on, on purpose (the messages it stored are then in no inbox there), delete "redisPrefix" from ${path.join(found.dir, 'LAYOUT')} `
    + '(docs/decisions.md, "Several nodes")');
}

/**
 * The refusal of a start of a data dir on another database of a shared Redis (the
 * URL's `/N`) than the one it last ran on there (`recorded`): every key of its cluster
 * is in that database, so on another it would be an island as without its Redis URL
 * ({@link refuseEmbeddedAfterShared}; a black-box SRE's finding: a `/1` added to the
 * URL did it, with one error line and `/readyz` 200).
 */
function databaseMoveRefusal(dataDir: string, dir: string, recorded: number, db: number): StartupError {
  return new StartupError(`the data dir ${dataDir} last ran on database ${recorded} of the Redis of PIXIU_REDIS_URL and is started on database ${db} (its /N): `
    + `its cluster's inboxes, claims and leases are in database ${recorded}, so it would answer 201 to messages that no node there and none of their clients see, `
    + `and they could not read the messages it stored for them. Set PIXIU_REDIS_URL to database ${recorded}. `
    + `To move this data dir to database ${db} on purpose (the messages it stored are then in no inbox there), delete "redisDb" from ${path.join(dir, 'LAYOUT')} `
    + '(docs/decisions.md, "Several nodes")');
}

/**
 * Refuses a start that would split a cluster: the data dir last ran on another database
 * of this Redis (its LAYOUT's `redisDb`: refused whatever runs there, not checked when
 * nothing was recorded), or on this Redis with another key prefix (the Redis knows its
 * store under it) while nodes of other data dirs are registered under that prefix. A data dir moved to another Redis, whose
 * cluster happens to use the recorded prefix, is not refused: joining that cluster
 * would be the wrong advice. Run before the store's claim, so a refused start writes
 * nothing to Redis under either prefix.
 * @returns the recorded prefix when this start moves the data dir from it to another on
 *   this Redis (not refused: no node runs under it), for {@link prefixMoveLine};
 *   undefined otherwise (the same prefix, none recorded, or another Redis)
 * @throws StartupError naming both databases, or both prefixes and the running nodes, and what to do
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function refuseClusterSplit(redis: Redis, opts: PrefixGuardOptions): Promise<string | undefined> {
  const { layout, dir } = opts.layout;
  const recordedDb = layout?.redisDb;
  if (recordedDb !== undefined && recordedDb !== opts.db) throw databaseMoveRefusal(opts.dataDir, dir, recordedDb, opts.db);
  const recorded = layout?.redisPrefix;
  if (recorded === undefined || recorded === opts.prefix || layout?.storeId === undefined) return undefined;
  if (!(await new PartitionClaims(redis, new Keys(recorded)).storeIds()).includes(layout.storeId)) return undefined;
  const nodes = await liveNodesUnder(redis, recorded, layout.storeId);
  if (nodes.length > 0) throw new StartupError(prefixSplitRefusal(opts.dataDir, recorded, opts.prefix, nodes, opts.redisUrl));
  return recorded;
}
