/**
 * Cutting text for what Pixiu writes back (error answers, log lines): never between
 * the two halves of a UTF-16 surrogate pair, so that the cut text stays well-formed —
 * strict JSON decoders (Rust's serde_json, Swift's) refuse a lone surrogate, and an
 * answer they cannot read tells its client nothing (docs/api.md, "Input rules").
 */

function isHigh(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

function isLow(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

/**
 * `s.slice(from, to)` (UTF-16 units), each end moved inwards by one where it would
 * split a surrogate pair.
 */
export function wholeSlice(s: string, from: number, to: number): string {
  const end = to > 0 && to < s.length && isHigh(s.charCodeAt(to - 1)) && isLow(s.charCodeAt(to)) ? to - 1 : to;
  const start = from > 0 && from < s.length && isLow(s.charCodeAt(from)) && isHigh(s.charCodeAt(from - 1)) ? from + 1 : from;
  return s.slice(start, end);
}

/** `s` cut to at most `max` UTF-16 units with `…` after it when cut, never inside a pair. */
export function cutText(s: string, max: number): string {
  return s.length <= max ? s : `${wholeSlice(s, 0, max)}…`;
}
