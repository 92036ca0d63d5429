/**
 * How deep a JSON request body may nest, checked on its bytes before it is parsed.
 * `JSON.parse` takes any depth, but not in time proportional to the bytes: a body of
 * 4 million `[` then as many `]` (under the body limit of the time, 8 MiB) held a node's event loop
 * 4.7 s and its heap 400 MiB, where a flat array of the same size takes 0.65 s; a
 * fresh tester froze a node 6.5 s with one such `POST /v1/me/ack` (any client JWT).
 * Message `data` may nest 64 levels (src/store/data-depth.ts), told precisely after
 * parsing; a body deeper than {@link MAX_BODY_DEPTH} cannot hold a valid one anywhere,
 * and is refused unparsed (docs/api.md, "Input rules"). A body within the depth still
 * costs its parse, bounded by `PIXIU_MAX_BODY_BYTES` alone (1 MiB by default: what a
 * body of that size costs is in the same section).
 */
import { MAX_READABLE_DEPTH } from '../store/data-depth.js';

/**
 * Most levels of arrays and objects in a request body: 1,000, as deep as stored content
 * is read ({@link MAX_READABLE_DEPTH}), far past what a valid body holds (`data`'s 64
 * levels inside a batch item: 67), and cheap for `JSON.parse`.
 */
export const MAX_BODY_DEPTH = MAX_READABLE_DEPTH;

/** The bytes the scan looks at, as JSON writes them (RFC 8259 §2, §7). */
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** What each byte does to the depth: `[` and `{` open a level (+1), `]` and `}` close one (-1). */
const LEVEL = new Int8Array(256);
LEVEL[0x5b] = 1;
LEVEL[0x7b] = 1;
LEVEL[0x5d] = -1;
LEVEL[0x7d] = -1;

/**
 * True when the JSON text `body` (UTF-8 bytes) opens more than `maxDepth` arrays or
 * objects within one another, brackets inside strings not counted (bytes of multibyte
 * characters are all 0x80 or above: never a quote or a bracket). Text that is not JSON
 * may give either answer; the parser refuses it after. One pass over the bytes, a few
 * ns each whatever their shape (11 – 31 ms for 8 MiB measured; JSON.parse takes 38 ms
 * to seconds for the same bytes).
 */
export function nestsDeeperThan(body: Buffer, maxDepth: number = MAX_BODY_DEPTH): boolean {
  if (body.length <= maxDepth) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const b = body[i] as number;
    if (inString) {
      if (b === BACKSLASH) i += 1;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) {
      inString = true;
    } else {
      depth += LEVEL[b] as number;
      if (depth > maxDepth) return true;
    }
  }
  return false;
}
