/**
 * A node's entry in the node-settings hash (`<prefix>node-settings`, node id → JSON;
 * written by shared-settings.ts at the node's start) as other nodes and `pixiu inspect
 * cluster` read it, and the build it names (README "Upgrades"). Each node puts its
 * build there — `{"build": {"version": "0.1.0", "commit": "c01b527"}}`, what `pixiu
 * --version` prints (src/version.ts) — so that the lines about peers
 * (membership-log.ts) and `inspect cluster` (cluster-view.ts) say which release each
 * node runs: during a rolling upgrade or a rollback, only each node's own `pixiu
 * listening` line said it, and an older node was listed like a newer one (an upgrade
 * tester's finding). An entry of a release from before it names none: its build is
 * `null`.
 *
 * The field is an addition that older releases read past: each reads an entry as a JSON
 * object and takes the fields it knows by name (the settings as numbers, `store`,
 * `secrets`), ignoring others — checked in 2e0830c and c1405e6's shared-settings.ts and
 * prefix-guard.ts, the only readers of the hash.
 */
import type { Redis } from 'ioredis';
import { redisCall } from '../redis/client.js';
import type { Keys } from '../redis/keys.js';
import type { BuildInfo } from '../version.js';

/** Longest `version` or `commit` read from an entry; a longer one (no build writes one) is not taken. */
const MAX_BUILD_TEXT = 64;

/** An entry as an object (empty when it is not one). */
export function parseEntry(text: string | undefined): Record<string, unknown> {
  try {
    const parsed = JSON.parse(text ?? '{}') as unknown;
    return typeof parsed === 'object' && parsed !== null ? parsed as Record<string, unknown> : {};
  } catch {
    return {};
  }
}

/** Whether `value` is a text an entry's build may hold. */
function buildText(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && value.length <= MAX_BUILD_TEXT;
}

/**
 * The build a parsed entry names, or null when it names none (an older release's
 * entry) or one that is malformed.
 */
export function buildOf(parsed: Record<string, unknown>): BuildInfo | null {
  const build = parsed.build as Partial<BuildInfo> | undefined;
  if (typeof build !== 'object' || build === null) return null;
  return buildText(build.version) && buildText(build.commit) ? { version: build.version, commit: build.commit } : null;
}

/**
 * Node id → the build its entry names (null: its entry names none, an older release),
 * for every node with an entry; a node without one (not yet written, or Redis lost it)
 * is not in the map. One HGETALL: read-only.
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function nodeBuilds(redis: Redis, keys: Keys): Promise<Map<string, BuildInfo | null>> {
  const all = await redisCall(() => redis.hgetall(keys.nodeSettings()));
  return buildsOf(all);
}

/** {@link nodeBuilds} of the hash's fields as read. */
export function buildsOf(all: Readonly<Record<string, string>>): Map<string, BuildInfo | null> {
  return new Map(Object.entries(all).map(([node, text]) => [node, buildOf(parseEntry(text))]));
}
