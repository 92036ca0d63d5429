/**
 * How deep a message's `data` may nest. JSON itself sets no limit (RFC 8259 §9 lets
 * an implementation set one), but V8's `JSON.stringify` recurses once per level and
 * throws `RangeError: Maximum call stack size exceeded` somewhere past a few thousand
 * levels, depending on how much stack is already in use where it runs. A message
 * accepted at ingest must be serialisable wherever it is delivered (a `msg` frame,
 * a history page), so ingest refuses `data` deeper than {@link MAX_DATA_DEPTH},
 * far below that point, before anything is serialised or stored (docs/api.md,
 * "Input rules").
 *
 * The walk is iterative (an explicit stack), so it cannot itself overflow, however
 * deep the value: the body parser (`JSON.parse`) is iterative too and accepts any depth.
 */
import { invalid } from '../errors.js';

/** Most levels of arrays and objects in `data`: `[[1]]` is 2 levels, `1` is 0. */
export const MAX_DATA_DEPTH = 64;

/**
 * Most levels a stored record may nest to be read. Higher than {@link MAX_DATA_DEPTH}:
 * records stored before ingest had its limit (up to several thousand levels) are
 * still read up to this depth, which `JSON.stringify` serialises safely; deeper ones
 * are treated as unreadable content (a gap, like expired content), never a crash.
 */
export const MAX_READABLE_DEPTH = 1000;

/**
 * True when `value` has arrays or objects nested more than `maxDepth` levels.
 * Stops at the first level past `maxDepth`.
 */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const values: unknown[] = [value];
  const depths: number[] = [1];
  for (let v = values.pop(); v !== undefined; v = values.pop()) {
    const depth = depths.pop() ?? 0;
    if (depth > maxDepth) return true;
    const children = Array.isArray(v) ? v : Object.values(v as object);
    for (const child of children) {
      if (typeof child === 'object' && child !== null) {
        values.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/**
 * Refuses `data` nested deeper than {@link MAX_DATA_DEPTH} levels.
 * @param what how the message names the value (default `data`)
 * @throws PixiuError INVALID_REQUEST
 */
export function checkDataDepth(data: unknown, what = 'data'): void {
  if (nestsDeeperThan(data, MAX_DATA_DEPTH)) throw invalid(`${what} nests deeper than ${MAX_DATA_DEPTH} levels`);
}
