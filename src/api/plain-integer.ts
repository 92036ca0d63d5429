/**
 * The API's rule for a whole number written as text (a query or path parameter), in a
 * module of its own so that the CLI can hold its numeric options to it without loading
 * the validators (Ajv) of src/api/route-validators.ts.
 */

/** A whole number as a query or path parameter is written: decimal digits, no sign, no leading zero. */
const PLAIN_INTEGER = /^(0|[1-9][0-9]*)$/;

/**
 * True when `text` is a whole number written as the API takes one in a query or path
 * (decimal digits, no sign, no leading zero: not `1e3`, `0x10`, `1.0` or ``); the CLI
 * holds its numeric options to the same rule.
 */
export function isPlainInteger(text: string): boolean {
  return PLAIN_INTEGER.test(text);
}
