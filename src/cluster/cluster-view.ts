/**
 * The cluster as Redis holds it (DESIGN.md §9), read once, for `pixiu inspect cluster`:
 * the node registry (node-registry.ts: node id → registration expiry), the nodes'
 * builds from their node-settings entries (node-entry.ts), the stores' descriptions,
 * partition claims and leases (partition-claims.ts), and the inbox generation. Read-only: TIME,
 * ZRANGE, HGETALL, GET and PTTL, nothing that writes (no script either: a
 * PartitionClaims would SCRIPT LOAD its scripts), so it can run as a Redis user allowed
 * `+@read` and TIME, CLIENT SETNAME, INFO and PING (README "Commands"; TIME is not in
 * `@read`, the others the client sends on connecting). Not one snapshot: a node that starts or stops while it reads may show
 * half-way (registered, its lease not yet read).
 */
import type { Redis } from 'ioredis';
import { redisCall, redisNowMs } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import { NODE_TTL_MS } from './node-registry.js';
import { PARTITION_SPACE, parseDescription, parseLease, partitionSpan, type StoreLease } from './partition-claims.js';
import { RETIRED_STORE } from './store-directory.js';
import { buildsOf } from './node-entry.js';
import { generationOf } from '../inbox/generation.js';

/**
 * A live node: its registration has not expired by Redis's clock. Times are ms relative
 * to the view's `redis_time` (one clock for every node, as the registry's).
 */
export interface NodeEntry {
  readonly node: string;
  /** The store whose lease names this node, and the URL it advertises there; null when no lease does (starting, or stopping). */
  readonly store: string | null;
  readonly url: string | null;
  /** Host name and process id of the node, from its lease (absent in leases of older releases, or with no lease). */
  readonly host?: string;
  readonly pid?: number;
  /**
   * The build it runs, as `pixiu --version` prints it (`0.1.0`, `c01b527`), from its
   * node-settings entry; null when the entry names none (a release too old to say) or
   * it has none (Redis lost it, or the node is starting).
   */
  readonly version: string | null;
  readonly commit: string | null;
  /** How long ago it last renewed its registration, ms (every 5 s while it runs). */
  readonly renewed_ms_ago: number;
  /** In how long its registration lapses unless renewed again, ms (up to 15 s). */
  readonly expires_in_ms: number;
}

/** A registration past its expiry that no node's renewal has removed yet (killed, hung, or cut off from Redis, moments ago). */
export interface LapsedNode {
  readonly node: string;
  /** How long ago it lapsed, ms. */
  readonly lapsed_ms_ago: number;
}

/** Who holds a store's lease: the node its records are read from. */
export interface StoreHolder {
  readonly node: string;
  readonly url: string;
  /** Whether that node is registered too; false: its lease outlives a node that is gone (it lapses within 15 s). */
  readonly registered: boolean;
  /** In how long the lease lapses unless renewed, ms (up to 15 s). */
  readonly lease_expires_in_ms: number;
}

/** A store (one data dir) that claimed partitions on this Redis, or holds a lease. */
export interface StoreEntry {
  readonly store: string;
  /**
   * Its store folder (`<dataDir>/xiu`, absolute: partition-claims.ts StoreDescription)
   * and the host it last started on, from its description; null when Redis has none.
   */
  readonly dir: string | null;
  readonly host: string | null;
  /** MsgID partitions it claims, and their runs (`8..15`). */
  readonly partitions: number;
  readonly blocks: readonly string[];
  /** The node serving it now; null when no node holds its lease: its messages cannot be read until one does. */
  readonly holder: StoreHolder | null;
}

/** The 256 MsgID partitions (DESIGN.md §2) by their claims. */
export interface PartitionSummary {
  readonly total: number;
  /** Claimed by a store, retired ones included. */
  readonly claimed: number;
  /** Claimed by no store: free for new data dirs (or their claims lost with Redis's data). */
  readonly free: number;
  /** Runs of partitions retired by an operator (their records read as gaps). */
  readonly retired: readonly string[];
  /** Runs of partitions whose store no node holds (no lease): deliveries of their messages wait, history reads answer 503. */
  readonly without_holder: readonly string[];
}

/**
 * The inbox generation in Redis (src/inbox/generation.ts; docs/decisions.md "The inbox
 * generation"): raised by `pixiu redis lost-writes` or a node that saw Redis lose writes.
 */
export interface GenerationEntry {
  /** Whether the key exists (false: never raised on this Redis, or Redis lost it). */
  readonly set: boolean;
  /** Its value (0 when not set); null when unreadable (set by hand: not a decimal of at most 15 digits). */
  readonly value: number | null;
  /**
   * How long ago it was raised, ms: a raise sets Redis's time in ms (generation-raise-2.lua),
   * so this is the value's age by Redis's clock (0 when ahead of it); null when not set or unreadable.
   */
  readonly raised_ms_ago: number | null;
}

/** What `pixiu inspect cluster` prints (snake_case, as `inspect inbox`). */
export interface ClusterView {
  /** Redis's time when read, ms since the epoch: what the relative times count from. */
  readonly redis_time: number;
  readonly prefix: string;
  readonly nodes: readonly NodeEntry[];
  readonly lapsed_nodes: readonly LapsedNode[];
  readonly stores: readonly StoreEntry[];
  readonly partitions: PartitionSummary;
  readonly inbox_generation: GenerationEntry;
}

/** `0..7`, `9` …: the runs of consecutive numbers of an ascending list. */
export function runsOf(sorted: readonly number[]): string[] {
  const runs: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === (sorted[j] as number) + 1) j++;
    runs.push(partitionSpan(sorted[i] as number, j - i + 1));
    i = j + 1;
  }
  return runs;
}

/** The claims hash as partition → store id, its partition bytes only (0..255). */
function claimsOf(raw: Record<string, string>): Map<number, string> {
  const claims = new Map<number, string>();
  for (const [field, store] of Object.entries(raw)) {
    const p = Number(field);
    if (Number.isInteger(p) && p >= 0 && p < PARTITION_SPACE && String(p) === field) claims.set(p, store);
  }
  return new Map([...claims].sort(([a], [b]) => a - b));
}

/** The generation key's text as {@link GenerationEntry}, aged by Redis's time `now` (ms). */
function generationEntry(text: string | null, now: number): GenerationEntry {
  const value = generationOf(text) ?? null;
  const set = text !== null;
  return { set, value, raised_ms_ago: set && value !== null ? Math.max(0, now - value) : null };
}

/**
 * Reads the cluster's registry, claims and leases under `keys`' prefix.
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function readClusterView(redis: Redis, keys: Keys): Promise<ClusterView> {
  const [now, registry, rawClaims, descriptions, entries, generationText] = await Promise.all([
    redisNowMs(redis),
    redisCall(() => redis.zrange(keys.nodes(), '0', '-1', 'WITHSCORES')),
    redisCall(() => redis.hgetall(keys.storePartitions())),
    redisCall(() => redis.hgetall(keys.storeDescriptions())),
    redisCall(() => redis.hgetall(keys.nodeSettings())),
    redisCall(() => redis.get(keys.inboxGeneration())),
  ]);
  const builds = buildsOf(entries);
  const claims = claimsOf(rawClaims);
  const storeIds = [...new Set([...Object.keys(descriptions), ...claims.values()])].filter((s) => s !== RETIRED_STORE);
  const leases = await Promise.all(storeIds.map(async (id) => {
    const key = keys.storeLease(id);
    const [text, ttlMs] = await redisCall(() => Promise.all([redis.get(key), redis.pttl(key)]));
    const lease = parseLease(text);
    return lease === undefined || ttlMs < 0 ? undefined : { lease, ttlMs };
  }));
  const byNode = new Map<string, { storeId: string; lease: StoreLease }>();
  storeIds.forEach((storeId, i) => {
    const held = leases[i];
    if (held !== undefined) byNode.set(held.lease.node, { storeId, lease: held.lease });
  });

  const nodes: NodeEntry[] = [];
  const lapsed: LapsedNode[] = [];
  for (let i = 0; i + 1 < registry.length; i += 2) {
    const node = registry[i] as string;
    const expiresAt = Number(registry[i + 1]);
    if (!(expiresAt > now)) {
      lapsed.push({ node, lapsed_ms_ago: now - expiresAt });
      continue;
    }
    const held = byNode.get(node);
    const build = builds.get(node) ?? null;
    nodes.push({
      node, store: held?.storeId ?? null, url: held?.lease.url ?? null,
      ...(held?.lease.host === undefined ? {} : { host: held.lease.host }),
      ...(held?.lease.pid === undefined ? {} : { pid: held.lease.pid }),
      version: build?.version ?? null, commit: build?.commit ?? null,
      renewed_ms_ago: Math.max(0, now - (expiresAt - NODE_TTL_MS)), expires_in_ms: expiresAt - now,
    });
  }
  // By URL (nodes of one machine together), then id; those without a lease last.
  nodes.sort((a, b) => (a.url ?? '\uffff').localeCompare(b.url ?? '\uffff') || a.node.localeCompare(b.node));
  const live = new Set(nodes.map((n) => n.node));

  const partitionsOf = new Map<string, number[]>();
  for (const [p, store] of claims) {
    const list = partitionsOf.get(store) ?? [];
    list.push(p);
    partitionsOf.set(store, list);
  }
  const stores: StoreEntry[] = storeIds.map((store, i) => {
    const description = parseDescription(descriptions[store] ?? '');
    const mine = partitionsOf.get(store) ?? [];
    const held = leases[i];
    return {
      store, dir: description?.dir ?? null, host: description?.host ?? null, partitions: mine.length, blocks: runsOf(mine),
      holder: held === undefined ? null : { node: held.lease.node, url: held.lease.url, registered: live.has(held.lease.node), lease_expires_in_ms: held.ttlMs },
    };
  });
  // In block order; stores that claim none (Redis lost their claims) last.
  stores.sort((a, b) => (partitionsOf.get(a.store)?.[0] ?? PARTITION_SPACE) - (partitionsOf.get(b.store)?.[0] ?? PARTITION_SPACE) || a.store.localeCompare(b.store));
  const unheld = new Set(stores.filter((s) => s.holder === null).map((s) => s.store));
  const claimed = [...claims];
  return {
    redis_time: now,
    prefix: keys.prefix,
    nodes,
    lapsed_nodes: lapsed,
    stores,
    partitions: {
      total: PARTITION_SPACE,
      claimed: claims.size,
      free: PARTITION_SPACE - claims.size,
      retired: runsOf(claimed.filter(([, s]) => s === RETIRED_STORE).map(([p]) => p)),
      without_holder: runsOf(claimed.filter(([, s]) => unheld.has(s)).map(([p]) => p)),
    },
    inbox_generation: generationEntry(generationText, now),
  };
}
