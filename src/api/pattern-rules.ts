/**
 * The rule of every JSON-schema `pattern` the API validates with, in words. A value
 * that does not match is answered with the field and its rule in words
 * (`body/to must be 1–128 characters, no whitespace, control characters or lone surrogates`), never
 * with the regular expression, which means little to an API user.
 *
 * Each pattern is declared where it is defined, with {@link wordedPattern}, so that a
 * pattern cannot be added without its words (a test also checks every pattern of the
 * OpenAPI document). A module with no imports, so that any schema module can use it.
 */

/** Rule in words by pattern, filled as the modules declaring patterns load. */
const rules = new Map<string, string>();

/**
 * Declares a schema pattern and its rule in words.
 *
 * @param pattern the regular expression as a schema's `pattern` holds it (Ajv compiles
 *   it with the `u` flag)
 * @param rule what a matching value is, worded to follow "must be", e.g.
 *   `1–64 characters, each one of A-Z a-z 0-9 . _ : -`
 * @returns `pattern`, unchanged, for the schema
 * @throws Error when the same pattern was declared with other words: an error names
 *   a rule by its pattern, so one pattern has one wording
 */
export function wordedPattern(pattern: string, rule: string): string {
  const known = rules.get(pattern);
  if (known !== undefined && known !== rule) {
    throw new Error(`pattern ${JSON.stringify(pattern)} is declared twice with other words: ${JSON.stringify(known)} and ${JSON.stringify(rule)}`);
  }
  rules.set(pattern, rule);
  return pattern;
}

/**
 * What a value that fails `pattern` is told, to follow the field's path: `must be` and
 * the rule declared with {@link wordedPattern}, or, for a pattern declared without
 * words, `has characters that are not allowed` (never the pattern itself).
 */
export function patternFailure(pattern: string): string {
  const rule = rules.get(pattern);
  return rule === undefined ? 'has characters that are not allowed' : `must be ${rule}`;
}

/** Whether `pattern` was declared with its words ({@link wordedPattern}). */
export function hasWords(pattern: string): boolean {
  return rules.has(pattern);
}

/** The words `pattern` was declared with ({@link wordedPattern}); undefined when none. */
export function wordsOf(pattern: string): string | undefined {
  return rules.get(pattern);
}
