/**
 * Broadcast filters (DESIGN.md §8): a broadcast reaches the connections whose JWT
 * `tags` match: `all` — every listed tag present; `any` — at least one present; both
 * given — both hold; none — everyone.
 */

import { wordedPattern } from '../api/pattern-rules.js';

/**
 * A tag: 1–64 characters, no whitespace or control characters. Here rather than with
 * the route (routes.ts), so that `pixiu token` and `pixiu connect` check their --tags
 * without loading the broadcaster, the store and the ingest path.
 */
export const tagSchema = { type: 'string', pattern: wordedPattern('^[^\\s\\p{Cc}\\p{Cs}]{1,64}$', '1–64 characters, no whitespace or control characters') } as const;
const TAG = new RegExp(tagSchema.pattern, 'u');

/** True when `tag` is a valid broadcast tag ({@link tagSchema}): one a filter can name. */
export function isTag(tag: string): boolean {
  return TAG.test(tag);
}

/** A filter as `POST /v1/broadcast` takes it. */
export interface TagFilter {
  readonly all?: readonly string[];
  readonly any?: readonly string[];
}

/**
 * True when `value` has a {@link TagFilter}'s shape: an object whose `all` and `any`,
 * when present, are lists of strings (what a stream entry's filter is checked by before
 * it is matched; the API's schema checks a request's).
 */
export function isTagFilter(value: unknown): value is TagFilter {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { all, any } = value as Record<string, unknown>;
  return [all, any].every((list) => list === undefined || (Array.isArray(list) && list.every((t) => typeof t === 'string')));
}

/** Most tags in one list of a filter. */
export const MAX_FILTER_TAGS = 100;

/** True when a connection with `tags` should get a broadcast with `filter`. */
export function matchesFilter(filter: TagFilter | undefined, tags: ReadonlySet<string>): boolean {
  if (!filter) return true;
  if (filter.all && !filter.all.every((t) => tags.has(t))) return false;
  if (filter.any && filter.any.length > 0 && !filter.any.some((t) => tags.has(t))) return false;
  return true;
}

/**
 * A filter as one text that two filters reaching the same connections share: each
 * list's tags sorted, each once, an empty list left out; "" for no filter (or only
 * empty lists: everyone). What a retry of a broadcast with a `client_msg_id` is
 * compared by (broadcaster.ts): `{"all":["b","a"]}` and `{"all":["a","b","a"]}` are
 * the same filter, `{"all":["a"]}` and `{"any":["a"]}` are not.
 */
export function filterKey(filter: TagFilter | undefined): string {
  const all = canonicalTags(filter?.all);
  const any = canonicalTags(filter?.any);
  if (all === undefined && any === undefined) return '';
  return JSON.stringify({ ...(all ? { all } : {}), ...(any ? { any } : {}) });
}

/** The tags of one list sorted (by UTF-16 code units) and each once; undefined when none. */
function canonicalTags(tags: readonly string[] | undefined): string[] | undefined {
  if (tags === undefined || tags.length === 0) return undefined;
  return [...new Set(tags)].sort();
}
