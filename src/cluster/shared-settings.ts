/**
 * Settings that act on state every node shares in Redis (DESIGN.md §9): the inbox cap
 * trims a user's inbox at every append, whichever node appends; the broadcast stream
 * and channel history caps trim at every publish; the room size cap, the connection
 * limit and the device cursors are checked by scripts on shared keys. A node given a
 * lower value than the others therefore lowers it for all of them, silently: messages,
 * broadcasts and publications the others promise to keep turn into gaps (a fresh
 * tester's finding). Each node publishes its values under its node id at start (and
 * again when Redis lost them), and warns of every value a live node has otherwise; the
 * values leave with the node.
 *
 * A node killed (`kill -9`) leaves its entry, and its registration lives on until its
 * TTL lapses (15 s): the same data dir restarted at once with another value was warned
 * of a mismatch with its own dead predecessor as if it were a live peer (an integrator
 * newcomer's finding). So each entry names the node's store, and an entry of this
 * node's own store is no live peer: one store is served by one running node at a time
 * (its data dir is locked, and its lease in Redis claimed at start, DESIGN.md §9). The
 * entry of the node whose lease the start found left behind by a dead process is
 * removed like a gone node's; another live one of this store (a copy of the data dir
 * started beside it, whose writes are suspended) keeps its entry.
 *
 * The entry also carries one-way digests of the node's API token and client-token key,
 * salted with the node's own salt (src/cluster/secret-digests.ts): a node started
 * without the shared secrets generates its own, and producers then got 401 from it with
 * nothing logged. A starting node logs each that differs on a live node at error —
 * also beside a node of a release before 3545053, whose unsalted digests it compares in
 * that scheme — and names at info the live nodes too old to publish digests; the nodes
 * whose entries it read go to `onCompared`, and each running node checks the nodes
 * that join after it the same way (joiner-secrets.ts).
 *
 * And it names the node's build (node-entry.ts): which release each node runs.
 */
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.js';
import { SETTINGS } from '../config/settings.js';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import type { NodeRegistry } from './node-registry.js';
import type { Logger } from '../logger.js';
import { outageFields } from '../errors.js';
import { settingMismatchLine } from './shared-settings-text.js';
import { PartitionClaims } from './partition-claims.js';
import { parseEntry } from './node-entry.js';
import { buildInfo } from '../version.js';
import {
  peerDigests, secretMismatchLine, secretsNotComparedLine, type NodeSecrets, type PeerDigests, type SecretCheck, type SecretName,
} from './secret-digests.js';

/** The settings every node sharing a Redis must agree on (docs/decisions.md, "Several nodes"). */
export const SHARED_SETTINGS = [
  'inboxCap', 'maxDeviceCursors', 'maxConnectionsPerUser', 'roomSizeCap',
  'broadcastStreamCap', 'channelHistory', 'channelHistoryTtlMs',
] as const satisfies readonly (keyof Config & keyof typeof SETTINGS)[];

/** One of {@link SHARED_SETTINGS}. */
export type SharedSetting = (typeof SHARED_SETTINGS)[number];

/** A shared setting this node has one value of and other live nodes another. */
export interface SettingMismatch {
  readonly setting: SharedSetting;
  /** Its environment variable, e.g. `PIXIU_INBOX_CAP`. */
  readonly env: string;
  readonly here: number;
  readonly there: number;
  /** The live nodes with `there`. */
  readonly nodes: readonly string[];
}

/** This node's values of {@link SHARED_SETTINGS}. */
function valuesOf(config: Config): Record<SharedSetting, number> {
  return Object.fromEntries(SHARED_SETTINGS.map((k) => [k, config[k]])) as Record<SharedSetting, number>;
}

/** What a node's entry names beside its settings, and what its start is compared with. */
export interface EntryOptions {
  /** This node's store (its entry names it); undefined: compared with all. */
  readonly storeId?: string;
  /** The node whose lease of this store was found left behind by a dead process at start (store-ownership.ts `leftBehind`). */
  readonly leftBehind?: string;
  /** This node's secrets' digests, published, and how to compare them with the live nodes' (secret-digests.ts). */
  readonly secrets?: SecretCheck;
}

/** A secret that differs on some live nodes (secret-digests.ts). */
export interface SecretMismatch {
  readonly which: SecretName;
  /** The first of those nodes' digests (each node salts its own: only their key kind is alike). */
  readonly theirs: PeerDigests;
  readonly nodes: readonly string[];
}

/**
 * Publishes this node's shared settings (secrets' digests and build too) under its id and
 * compares them with those of the other live nodes (registered in `registry`); the
 * entries of nodes no longer registered are removed, and those of an earlier node of
 * this node's store (see the module comment) are not compared — removed too when it is
 * `leftBehind`.
 * @returns each setting whose value differs on some live node, once per other value,
 *   and each secret that differs on some live node, once per secret (and, for the
 *   client-token key, per kind of key source there): each node salts its digests with
 *   its own salt, so whether two other nodes share a secret cannot be told. An entry of
 *   the first scheme (no salt: a release before 3545053) is compared in that scheme
 *   (secret-digests.ts); the live nodes whose entries hold no digests (a release from
 *   before them) are `uncompared` — none when this node compares no secrets; `compared`
 *   names every live node whose entry was read (those of this node's store included):
 *   the running node's check of joiners (joiner-secrets.ts) leaves them out
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function compareNodeEntries(
  redis: Redis, keys: Keys, registry: NodeRegistry, config: Config, at: EntryOptions = {},
): Promise<{ settings: SettingMismatch[]; secrets: SecretMismatch[]; uncompared: string[]; compared: string[] }> {
  const { storeId, leftBehind } = at;
  const key = keys.nodeSettings();
  const mine = valuesOf(config);
  const entry = JSON.stringify({
    ...mine, ...(storeId === undefined ? {} : { store: storeId }), ...(at.secrets === undefined ? {} : { secrets: at.secrets.digests }),
    // Which release this node runs, for the other nodes' lines and `inspect cluster` (node-entry.ts).
    build: buildInfo(),
  });
  const [, all] = await redisCall(() => Promise.all([redis.hset(key, registry.node, entry), redis.hgetall(key)]));
  const others = Object.keys(all).filter((n) => n !== registry.node);
  const live = await registry.liveAmong(others);
  // Not compared: every live node of this store. Removed: only the one the store's
  // start judged left behind by a dead process (two copies of one data dir started
  // together each see the other, and both run: neither entry may go).
  const predecessors = storeId === undefined ? [] : [...live].filter((n) => storeOf(all[n]) === storeId);
  const gone = [...others.filter((n) => !live.has(n)), ...predecessors.filter((n) => n === leftBehind)];
  if (gone.length > 0) await redisCall(() => redis.hdel(key, ...gone));
  const mismatches = new Map<string, { setting: SharedSetting; env: string; here: number; there: number; nodes: string[] }>();
  const secrets = new Map<string, { which: SecretName; theirs: PeerDigests; nodes: string[] }>();
  const uncompared: string[] = [];
  for (const node of live) {
    if (predecessors.includes(node)) continue;
    const parsed = parseEntry(all[node]);
    const theirs = readValues(parsed);
    for (const setting of SHARED_SETTINGS) {
      const there = theirs[setting];
      if (there === undefined || there === mine[setting]) continue;
      const id = `${setting}=${there}`;
      const found = mismatches.get(id) ?? { setting, env: SETTINGS[setting].env, here: mine[setting], there, nodes: [] };
      found.nodes.push(node);
      mismatches.set(id, found);
    }
    if (at.secrets === undefined) continue;
    const digests = peerDigests(parsed);
    if (digests === undefined) {
      uncompared.push(node);
      continue;
    }
    // One scrypt per live node and salted secret, one after the other (secret-digests.ts).
    for (const which of await at.secrets.differing(digests)) {
      const id = which === 'PIXIU_API_TOKEN' ? which : `${which}=${digests.jwtKind}`;
      const found = secrets.get(id) ?? { which, theirs: digests, nodes: [] };
      found.nodes.push(node);
      secrets.set(id, found);
    }
  }
  return { settings: [...mismatches.values()], secrets: [...secrets.values()], uncompared, compared: [...live] };
}

/**
 * {@link compareNodeEntries} without secrets: the settings that differ.
 * @param storeId this node's store (its entry names it); undefined: compared with all
 * @param leftBehind the node whose lease of this store was found left behind by a dead
 *   process at start (store-ownership.ts `leftBehind`)
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function publishSharedSettings(
  redis: Redis, keys: Keys, registry: NodeRegistry, config: Config, storeId?: string, leftBehind?: string,
): Promise<SettingMismatch[]> {
  return (await compareNodeEntries(redis, keys, registry, config, { storeId, leftBehind })).settings;
}

/** A node's shared settings as published in Redis ({@link announceSharedSettings}). */
export interface SharedSettingsAnnouncement {
  /**
   * Publishes them again and warns of each mismatch, as at start: for when Redis lost
   * them (FLUSHALL, restarted empty; the node registry finds its own entry gone). Never
   * rejects: a Redis failure is logged.
   * @param retry true for a write-back tried again after one that failed (node-membership.ts,
   *   at each renewal): its failure is logged at debug, the first one's at warn — not a
   *   warn line every 5 s for as long as Redis refuses it (review35b F1)
   * @returns true when they were published, false when Redis failed (to be tried again:
   *   node-membership.ts)
   */
  republish(retry?: boolean): Promise<boolean>;
  /** Removes the node's entry (shutdown). Never rejects. */
  withdraw(): Promise<void>;
}

/** What {@link announceSharedSettings} publishes and compares, and whom it tells which nodes it compared. */
export interface AnnounceOptions extends Omit<EntryOptions, 'secrets'> {
  readonly secrets?: NodeSecrets;
  /**
   * The live nodes whose entries a comparison read (at start, and at each write-back),
   * called before its lines are logged: the running node's check of joiners
   * (joiner-secrets.ts) does not compare them again. Not called when Redis failed.
   */
  readonly onCompared?: (nodes: readonly string[]) => void;
}

/**
 * {@link publishSharedSettings} at a node's start, with a warning logged for each
 * mismatch; a Redis failure is logged and the start goes on (the check is advice).
 * @returns how to publish them again, and to remove the node's entry at shutdown
 */
export async function announceSharedSettings(
  redis: Redis, keys: Keys, registry: NodeRegistry, config: Config, logger: Logger, at: AnnounceOptions = {},
): Promise<SharedSettingsAnnouncement> {
  const publish = async (retry = false): Promise<boolean> => {
    try {
      const found = await compareNodeEntries(redis, keys, registry, config, at);
      at.onCompared?.(found.compared);
      const here = at.secrets;
      if (here !== undefined && (found.secrets.length > 0 || found.uncompared.length > 0)) {
        const urls = await advertisedUrls(redis, keys);
        const urlsOf = (nodes: readonly string[]): (string | null)[] => nodes.map((n) => urls.get(n) ?? null);
        for (const m of found.secrets) {
          logger.error({ secret: m.which, nodes: m.nodes, urls: urlsOf(m.nodes) }, secretMismatchLine(m.which, here, m.theirs, m.nodes, urls));
        }
        if (found.uncompared.length > 0) {
          logger.info({ nodes: found.uncompared, urls: urlsOf(found.uncompared) }, secretsNotComparedLine(found.uncompared, urls));
        }
      }
      for (const m of found.settings) {
        logger.warn({ setting: m.env, here: m.here, there: m.there, nodes: m.nodes }, settingMismatchLine(m));
      }
      return true;
    } catch (err) {
      logger[retry ? 'debug' : 'warn']({ ...outageFields(err) }, 'could not compare the shared settings with the other nodes\' (Redis unavailable); going on');
      return false;
    }
  };
  await publish();
  return {
    republish: publish,
    withdraw: () => redisCall(() => redis.hdel(keys.nodeSettings(), registry.node)).then(() => undefined, () => undefined),
  };
}

/**
 * Node id → the URL it advertises, from the store leases (a node without one, or a
 * Redis that does not answer: not in it — the line names the node by id alone).
 */
async function advertisedUrls(redis: Redis, keys: Keys): Promise<Map<string, string>> {
  const leases = await new PartitionClaims(redis, keys).leasesByNode().catch(() => new Map<string, { url: string }>());
  return new Map([...leases].map(([node, lease]) => [node, lease.url]));
}

/** The store a node-settings entry names, if any (an entry of an older release names none). */
export function storeOf(text: string | undefined): string | undefined {
  const { store } = parseEntry(text);
  return typeof store === 'string' ? store : undefined;
}

/** Another node's published values, the numbers only (an entry of another release may lack some). */
function readValues(parsed: Record<string, unknown>): Partial<Record<SharedSetting, number>> {
  return Object.fromEntries(SHARED_SETTINGS.filter((k) => typeof parsed[k] === 'number').map((k) => [k, parsed[k]]));
}
