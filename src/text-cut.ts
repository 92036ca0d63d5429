/**
 * Cutting and quoting text for what Pixiu writes back (error answers, log lines).
 * Cuts never fall between the two halves of a UTF-16 surrogate pair, so that the cut
 * text stays well-formed — strict JSON decoders (Rust's serde_json, Swift's) refuse a
 * lone surrogate, and an answer they cannot read tells its client nothing (docs/api.md,
 * "Input rules"). Text Pixiu did not write is quoted and escaped ({@link quotedText}).
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

/** Each character outside printable ASCII (U+0020 space to U+007E `~`). */
const NOT_PRINTABLE = /[^\x20-\x7e]/g;
/** Printable ASCII only. */
const PRINTABLE = /^[\x20-\x7e]*$/;

/** `json` with each character outside printable ASCII written as its `\uXXXX` escape (UTF-16 units). */
function asciiOnly(json: string): string {
  return json.replace(NOT_PRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Options of {@link quotedText}. */
export interface QuoteOptions {
  /**
   * A string of printable ASCII only, `max` long at most, is shown as it is, without
   * quotes (folder names in a list: `0, 1, 2`); any other is quoted. Default false.
   */
  readonly bare?: boolean;
}

/**
 * `value` as a one-line message — an error, a refusal, a log line's text — repeats
 * text Pixiu did not write: read from a file (a LAYOUT's fields), the disk (a folder's
 * name) or a request (an Origin header). It is written as JSON (a string in double
 * quotes), and each character JSON leaves outside printable ASCII is escaped as
 * `\uXXXX`: JSON.stringify escapes the C0 controls (`\n`, `\u001b`) but leaves DEL,
 * the C1 controls (U+009B is CSI to a terminal) and the rest of Unicode as they are
 * (`é` is shown `\u00e9`). So it cannot break the line, drive the terminal it is
 * read on, or pass for the message's own words.
 *
 * Cut: a string longer than `max` UTF-16 units is cut to `max` before it is quoted,
 * never inside a surrogate pair ({@link wholeSlice}), with `…` after the closing quote
 * (`"abc"…`: what is quoted is exactly the value's start); its escapes may make the
 * result longer than `max`. Another value (a number, `null`, an object) is written as
 * its JSON, escaped, cut to `max` characters with `…` after; `undefined` as `undefined`.
 */
export function quotedText(value: unknown, max: number, opts: QuoteOptions = {}): string {
  if (typeof value === 'string') {
    if (opts.bare === true && value.length <= max && PRINTABLE.test(value)) return value;
    const cut = value.length > max;
    const text = asciiOnly(JSON.stringify(cut ? wholeSlice(value, 0, max) : value));
    return cut ? `${text}…` : text;
  }
  const text = asciiOnly(JSON.stringify(value) ?? String(value));
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
