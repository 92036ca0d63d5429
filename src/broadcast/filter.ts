/**
 * Broadcast filters (DESIGN.md §8): a broadcast reaches the connections whose JWT
 * `tags` match: `all` — every listed tag present; `any` — at least one present; both
 * given — both hold; none — everyone.
 */

/** A filter as `POST /v1/broadcast` takes it. */
export interface TagFilter {
  readonly all?: readonly string[];
  readonly any?: readonly string[];
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
