/**
 * Lone UTF-16 surrogates in message content (`data`), refused at ingest. JSON text can
 * carry one as an escape (`"\ud83d"` with no low surrogate after it: RFC 8259 §8.2
 * calls such a string's behaviour unpredictable), and JavaScript keeps it, but strict
 * decoders refuse the whole text: Rust's serde_json ("lone leading surrogate in hex
 * escape"), Swift's JSONDecoder. A client that cannot decode a `msg` frame cannot ack
 * it, so one such message stalled its user's inbox (redelivered, 4008, reconnect, the
 * same frame again: an integrator newcomer's finding). Ids, rooms, `from` and tags
 * refuse lone surrogates by their schemas, worded as here ({@link loneSurrogateWords},
 * error-words.ts); `type` is ASCII; this covers `data`, its keys and string values at
 * any depth (docs/api.md, "Input rules").
 *
 * Cheap on the hot path: a lone surrogate can only arrive as a `\uD800`–`\uDFFF`
 * escape in the body's text (bytes that are not UTF-8 are refused before, and a
 * surrogate's own UTF-8 bytes are not UTF-8), so the text is scanned for an escape
 * that is not half of a pair ({@link holdsLoneSurrogate}: producers such as Python's
 * `json.dumps` write every emoji as a pair of escapes) and the parsed value is walked,
 * to name where, only when it holds one.
 */

import { cutText } from '../text-cut.js';

/** Longest path an error names; a longer one is cut with `…` (keys may be 64 KiB long). */
const MAX_PATH_CHARS = 200;

/** The value of the four hex digits at `text[i..i+3]`, or -1 when they are not four hex digits. */
function hex4(text: string, i: number): number {
  let value = 0;
  for (let k = i; k < i + 4; k++) {
    const c = text.charCodeAt(k);
    const digit = c >= 48 && c <= 57 ? c - 48 : c >= 65 && c <= 70 ? c - 55 : c >= 97 && c <= 102 ? c - 87 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/**
 * True when the JSON text `text` (parsed already: well-formed) holds a lone
 * surrogate: a `\uD800`–`\uDBFF` escape not followed at once by a `\uDC00`–`\uDFFF`
 * one, or such a low one on its own. Exact: escapes are read in order, so an escaped
 * backslash (`\\ud83d` is the text `\ud83d`) is no escape. One `indexOf` per
 * backslash: a body without any costs one scan of its text.
 */
export function holdsLoneSurrogate(text: string): boolean {
  for (let i = text.indexOf('\\'); i !== -1; i = text.indexOf('\\', i)) {
    if (text.charCodeAt(i + 1) !== 0x75 /* u */) {
      i += 2; // a one-character escape (\\, \", \n, …)
      continue;
    }
    const unit = hex4(text, i + 2);
    if (unit >= 0xdc00 && unit <= 0xdfff) return true;
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const low = text.charCodeAt(i + 6) === 0x5c && text.charCodeAt(i + 7) === 0x75 ? hex4(text, i + 8) : -1;
      if (low < 0xdc00 || low > 0xdfff) return true;
      i += 12;
      continue;
    }
    i += 6;
  }
  return false;
}

/** A lone surrogate (with the u flag a pair is one code point, not of category Cs). */
const LONE_SURROGATE = /\p{Cs}/u;
/** Every lone surrogate, for {@link wholeCharacters}. */
const LONE_SURROGATES = /\p{Cs}/gu;

/**
 * True when `s` holds no lone surrogate: every strict JSON decoder reads it back
 * (String.prototype.isWellFormed, not in this project's TypeScript lib).
 */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/** `s` with each lone surrogate replaced by U+FFFD, the whole character a decoder would put there. */
export function wholeCharacters(s: string): string {
  return s.replace(LONE_SURROGATES, '\ufffd');
}

/** `\ud83d`: the escape of the first lone surrogate of `s`, or undefined when it holds none. */
function firstLoneSurrogate(s: string): string | undefined {
  const found = LONE_SURROGATE.exec(s);
  return found === null ? undefined : `\\u${found[0].charCodeAt(0).toString(16)}`;
}

/**
 * Why a string with a lone surrogate is refused, in words to follow its name, as
 * `data`'s refusal says it (`holds a lone surrogate (\ud83d), which strict JSON
 * decoders …`); undefined when `s` holds none. For the fields that schemas check
 * (error-words.ts: a broadcast tag, an id): where a whole character would be taken.
 */
export function loneSurrogateWords(s: string): string | undefined {
  const lone = firstLoneSurrogate(s);
  return lone === undefined ? undefined : `holds a lone surrogate (${lone}), ${ADVICE}`;
}

/** A path cut to {@link MAX_PATH_CHARS}, never inside a surrogate pair (a key may hold emoji). */
function cut(path: string): string {
  return cutText(path, MAX_PATH_CHARS);
}

/**
 * Where `value` first holds a lone surrogate, in words to follow the name of `value`
 * (`data`, `messages/3/data`): `/k holds a lone surrogate (\ud83d) …` for a string,
 * `/k has a key holding …` for a key of the object at `/k`; undefined when it holds
 * none. Paths are JSON Pointers (RFC 6901: `~` written `~0`, `/` written `~1`), as the
 * schema errors write them. Iterative (an explicit stack): `value` may nest deep.
 */
export function loneSurrogateFault(value: unknown): string | undefined {
  const values: unknown[] = [value];
  const paths: string[] = [''];
  for (let v = values.pop(); v !== undefined; v = values.pop()) {
    const path = paths.pop() ?? '';
    if (typeof v === 'string') {
      const words = loneSurrogateWords(v);
      if (words !== undefined) return `${cut(path)} ${words}`;
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    const isArray = Array.isArray(v);
    const keys = isArray ? undefined : Object.keys(v);
    if (keys !== undefined) {
      for (const key of keys) {
        const lone = firstLoneSurrogate(key);
        if (lone !== undefined) return `${cut(path)} has a key holding a lone surrogate (${lone}), ${ADVICE}`;
      }
    }
    const children: readonly unknown[] = isArray ? (v as unknown[]) : Object.values(v);
    // Pushed last to first, so that the first in document order is found first.
    for (let i = children.length - 1; i >= 0; i--) {
      const child = children[i];
      if (typeof child !== 'string' && (typeof child !== 'object' || child === null)) continue;
      values.push(child);
      paths.push(`${path}/${isArray ? i : pointerToken((keys as string[])[i] as string)}`);
    }
  }
  return undefined;
}

/** What a refusal says after the surrogate. */
const ADVICE = 'which strict JSON decoders (Rust, Swift) refuse: send whole characters (a high surrogate followed by a low one)';

/** A key as a JSON Pointer reference token (RFC 6901 §3). */
function pointerToken(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}
