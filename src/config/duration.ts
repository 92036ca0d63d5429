/**
 * Durations in settings (`PIXIU_MESSAGE_TTL=7d`): read by the `ms` package, and what a
 * refusal says of a value that is none. `ms` reads a number and one unit, the number
 * with a fraction or a sign, a space before the unit, the unit in any case and long
 * (`1.5s`, `1 s`, `1S`, `2 hours`), and weeks and years too (`1w`, `1y`): all taken,
 * as they always were (README "Commands" says so), though `--help` shows the short
 * forms only. It reads no compound duration (`5m5s`).
 */
import ms from 'ms';

/**
 * What a duration is, for the refusal of a value that is none: said apart from a value
 * out of range, which an operator would otherwise read it as (an SRE's finding with `5m5s`).
 */
export const DURATION_FORMS = 'give a number and one unit, ms, s, m, h or d (e.g. 500ms, 30s, 1h, 7d; a bare number is milliseconds); '
  + 'compound durations like 5m5s are not taken';

/**
 * A duration's text in whole milliseconds: digits alone are milliseconds, else what
 * `ms` reads, rounded; undefined when it is no duration (empty, over 100 characters,
 * a compound, no number).
 */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  if (t.length === 0 || t.length > 100) return undefined;
  // `ms` answers undefined for text it cannot read; it throws only on non-strings.
  const v = ms(t as ms.StringValue) as number | undefined;
  return typeof v === 'number' && Number.isFinite(v) ? Math.round(v) : undefined;
}

/**
 * Why the text of a duration setting was refused, after `source="text" `: that it is no
 * duration (for a list, which part), with {@link DURATION_FORMS}, or that it is out of
 * range (the bounds follow it); undefined when neither says it (a list over its length).
 * @param list the setting is a comma-separated list of durations
 */
export function durationRefusal(text: string, list: boolean): string | undefined {
  const parts = list ? text.split(',') : [text];
  const bad = parts.find((p) => parseDuration(p) === undefined);
  if (bad !== undefined) {
    return list ? `is not a list of durations: ${JSON.stringify(bad.trim())} is no duration; ${DURATION_FORMS}` : `is not a duration: ${DURATION_FORMS}`;
  }
  return list && parts.length > 20 ? undefined : 'is out of range';
}
