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
 * The same walk refuses numbers that are not finite: `JSON.parse` reads a literal past
 * the double range (`1e400`) as Infinity, which would be stored and delivered as `null`.
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

/** What {@link dataFault} found: too deep, or a number that is not finite. */
type DataFault = 'deep' | 'non-finite';

/**
 * The first fault of `value` as message content: arrays or objects nested more than
 * `maxDepth` levels ('deep', found at the first level past it), or, when
 * `finiteNumbers` is set, a number that is not finite ('non-finite'). JSON text has no
 * such number, but `JSON.parse` reads a literal past the double range (`1e400`) as
 * Infinity, which `JSON.stringify` writes as `null`.
 */
function dataFault(value: unknown, maxDepth: number, finiteNumbers: boolean): DataFault | undefined {
  if (typeof value !== 'object' || value === null) return finiteNumbers && typeof value === 'number' && !Number.isFinite(value) ? 'non-finite' : undefined;
  const values: unknown[] = [value];
  const depths: number[] = [1];
  for (let v = values.pop(); v !== undefined; v = values.pop()) {
    const depth = depths.pop() ?? 0;
    if (depth > maxDepth) return 'deep';
    const children = Array.isArray(v) ? v : Object.values(v as object);
    for (const child of children) {
      if (typeof child === 'object' && child !== null) {
        values.push(child);
        depths.push(depth + 1);
      } else if (finiteNumbers && typeof child === 'number' && !Number.isFinite(child)) {
        return 'non-finite';
      }
    }
  }
  return undefined;
}

/**
 * True when `value` has arrays or objects nested more than `maxDepth` levels.
 * Stops at the first level past `maxDepth`.
 */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  return dataFault(value, maxDepth, false) === 'deep';
}

/**
 * Refuses `data` that could not be delivered as it was sent (DESIGN.md §3: content
 * round-trips): nested deeper than {@link MAX_DATA_DEPTH} levels, or holding a number
 * that is not finite (a literal such as `1e400`, which would be stored and delivered
 * as `null`; docs/api.md, "Input rules").
 * @param what how the message names the value (default `data`)
 * @throws PixiuError INVALID_REQUEST
 */
export function checkData(data: unknown, what = 'data'): void {
  const fault = dataFault(data, MAX_DATA_DEPTH, true);
  if (fault === 'deep') throw invalid(`${what} nests deeper than ${MAX_DATA_DEPTH} levels`);
  if (fault === 'non-finite') throw invalid(`${what} holds a number outside the range of a double (such as 1e400), which JSON cannot carry back`);
}
