/**
 * Lone UTF-16 surrogates in message content (`data`), refused at ingest. JSON text can
 * carry one as an escape (`"\ud83d"` with no low surrogate after it: RFC 8259 §8.2
 * calls such a string's behaviour unpredictable), and JavaScript keeps it, but strict
 * decoders refuse the whole text: Rust's serde_json ("lone leading surrogate in hex
 * escape"), Swift's JSONDecoder. A client that cannot decode a `msg` frame cannot ack
 * it, so one such message stalled its user's inbox (redelivered, 4008, reconnect, the
 * same frame again: an integrator newcomer's finding). Ids, rooms, `from` and tags
 * refuse lone surrogates by their schemas; `type` is ASCII; this covers `data`, its
 * keys and string values at any depth (docs/api.md, "Input rules").
 *
 * Cheap on the hot path: a lone surrogate can only arrive as a `\uD800`–`\uDFFF`
 * escape in the body's text (bytes that are not UTF-8 are refused before, and a
 * surrogate's own UTF-8 bytes are not UTF-8), so the parsed value is walked only when
 * the text holds such an escape ({@link mayHoldLoneSurrogate}), which a pair (an emoji
 * written `\ud83d\ude00`) also does.
 */

/** An escape of a UTF-16 surrogate (U+D800–U+DFFF) in JSON text, either case. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

/** Longest path an error names; a longer one is cut with `…` (keys may be 64 KiB long). */
const MAX_PATH_CHARS = 200;

/**
 * True when the JSON text `text` may hold a lone surrogate: it holds an escape of a
 * surrogate, paired or not (or `\\` followed by such letters: a false alarm only costs
 * the walk). False means no string or key of its value holds one.
 */
export function mayHoldLoneSurrogate(text: string): boolean {
  return SURROGATE_ESCAPE.test(text);
}

/** A lone surrogate (with the u flag a pair is one code point, not of category Cs). */
const LONE_SURROGATE = /\p{Cs}/u;

/** `\ud83d`: the escape of the first lone surrogate of `s`, or undefined when it holds none. */
function firstLoneSurrogate(s: string): string | undefined {
  const found = LONE_SURROGATE.exec(s);
  return found === null ? undefined : `\\u${found[0].charCodeAt(0).toString(16)}`;
}

/** A path cut to {@link MAX_PATH_CHARS}. */
function cut(path: string): string {
  return path.length <= MAX_PATH_CHARS ? path : `${path.slice(0, MAX_PATH_CHARS)}…`;
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
      const lone = firstLoneSurrogate(v);
      if (lone !== undefined) return `${cut(path)} holds a lone surrogate (${lone}), ${ADVICE}`;
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
