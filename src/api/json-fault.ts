/**
 * Where a text first stops being JSON (RFC 8259's grammar), for the refusals of
 * src/api/json-error.ts: V8's `JSON.parse` names a position for most faults but not for
 * an unexpected token ("Unexpected token 'u', "…" is not valid JSON") nor for a text
 * that is one bad word (`NaN`: ""NaN" is not valid JSON"), and for a misspelt literal
 * it names the character after the letters it took for one (`to=bob`: 'o', read as the
 * start of `true`), where a producer looks for the start of the word.
 *
 * Only asked for a text JSON.parse refused, so it is linear and allocates little; depth
 * is held in an array, not the call stack.
 */

/** JSON's whitespace (RFC 8259 §2): space, tab, line feed, carriage return. */
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
/** The characters after a `\` in a string, but `u` (RFC 8259 §7). */
const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const LITERALS = ['true', 'false', 'null'] as const;
/** A number from where it starts (RFC 8259 §6), matched sticky at the start. */
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * The first place in `text` where no JSON text could go on as it does.
 * A leading byte order mark is skipped, as the body's parser skips it.
 * @param text a body, as decoded from UTF-8
 * @returns the UTF-16 index of the first character that breaks the grammar — for a
 *   value that is not one, where that value starts (`undefined`, `tru`, `NaN`: their
 *   first letter); `text.length` when the text ends before its value does; undefined
 *   when the text is JSON
 */
export function firstJsonFault(text: string): number | undefined {
  const n = text.length;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  /** The open containers, innermost last: `}` or `]`, what closes each. */
  const open: string[] = [];
  const skipWhitespace = (): void => {
    while (i < n && WHITESPACE.has(text.charCodeAt(i))) i++;
  };
  /** Past the string that starts at `i`; false, with `i` at the fault, when it is not one. */
  const string = (): boolean => {
    i++;
    for (;;) {
      if (i >= n) return false;
      const c = text[i] as string;
      if (c === '"') {
        i++;
        return true;
      }
      if (c.charCodeAt(0) < 0x20) return false;
      if (c === '\\') {
        const e = text[i + 1];
        if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else if (e !== undefined && ESCAPES.has(e)) i += 2;
        else return false;
      } else i++;
    }
  };
  /** Past a key and its `:` (whitespace skipped each side); false at the fault. */
  const key = (): boolean => {
    if (text[i] !== '"' || !string()) return false;
    skipWhitespace();
    if (text[i] !== ':') return false;
    i++;
    skipWhitespace();
    return true;
  };
  skipWhitespace();
  for (;;) {
    // A value starts at i.
    const c = text[i];
    if (c === '{' || c === '[') {
      i++;
      skipWhitespace();
      const close = c === '{' ? '}' : ']';
      if (text[i] === close) i++;
      else {
        open.push(close);
        if (c === '{' && !key()) return i;
        continue;
      }
    } else if (c === '"') {
      if (!string()) return i;
    } else if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      const number = NUMBER.exec(text);
      // Only a "-" with no digit after it matches nothing ("01", "1.": the fault is after the match).
      if (number === null) return i + 1;
      i += number[0].length;
    } else {
      const literal = LITERALS.find((word) => text.startsWith(word, i));
      if (literal === undefined) return i;
      i += literal.length;
    }
    // After a value: the end, a comma, or what closes its container.
    for (;;) {
      skipWhitespace();
      const close = open.at(-1);
      if (close === undefined) return i < n ? i : undefined;
      if (text[i] === close) {
        open.pop();
        i++;
        continue;
      }
      if (text[i] !== ',') return i;
      i++;
      skipWhitespace();
      if (close === '}' && !key()) return i;
      break;
    }
  }
}
