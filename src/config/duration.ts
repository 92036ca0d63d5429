/**
 * Durations in settings (`PIXIU_MESSAGE_TTL=7d`): read by the `ms` package, and what a
 * refusal says of a value that is none. `ms` reads a number and one unit, the number
 * with a fraction or a sign, a space before the unit, the unit in any case but one and
 * long (`1.5s`, `1 s`, `1S`, `2 hours`), and weeks and years too (`1w`, `1y`): all
 * taken, as they always were (README "Commands" says so), though `--help` shows the
 * short forms only. It reads no compound duration (`5m5s`). One form `ms` reads is
 * refused: an uppercase `M` alone as the unit, which `ms` reads as minutes and ISO 8601 (`P1M`)
 * and many people as months — `PIXIU_MESSAGE_TTL=1M` meant for a month kept messages
 * a minute (the walk31 tester's F6).
 */
import ms from 'ms';

/** A number with an uppercase `M` alone as its unit (`1M`, `1.5 M`): minutes or months? */
const MONTH_OR_MINUTE = /^[-+]?[\d.]+\s*M$/;

/** Why a duration with an uppercase `M` for its unit is refused, and what to write instead. */
export const AMBIGUOUS_M = 'an uppercase M is refused: minutes or months would be a guess (ISO 8601\'s P1M is a month); '
  + 'write m for minutes (5m) and days for a month (30d)';

/** True when `text` is a number with an uppercase `M` alone as its unit ({@link AMBIGUOUS_M}). */
export function isAmbiguousM(text: string): boolean {
  return MONTH_OR_MINUTE.test(text.trim());
}

/**
 * What `ms` reads `text` as, in ms (not rounded); undefined when it reads nothing, or
 * for an uppercase `M` unit ({@link AMBIGUOUS_M}). For `PIXIU_*` settings and
 * `pixiu token --ttl`, which reads digits alone as seconds before this.
 */
export function msOf(text: string): number | undefined {
  const t = text.trim();
  if (t.length === 0 || t.length > 100 || isAmbiguousM(t)) return undefined;
  // `ms` answers undefined for text it cannot read; it throws only on non-strings (and the empty one).
  const v = ms(t as ms.StringValue) as number | undefined;
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/**
 * What a duration is, for the refusal of a value that is none: said apart from a value
 * out of range, which an operator would otherwise read it as (an SRE's finding with `5m5s`).
 */
export const DURATION_FORMS = 'give a number and one unit, ms, s, m, h or d (e.g. 500ms, 30s, 1h, 7d; a bare number is milliseconds); '
  + 'compound durations like 5m5s are not taken';

/**
 * A duration's text in whole milliseconds: digits alone are milliseconds, else what
 * `ms` reads, rounded ({@link msOf}); undefined when it is no duration (empty, over
 * 100 characters, a compound, no number, an uppercase `M` unit).
 */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const v = msOf(t);
  return v === undefined ? undefined : Math.round(v);
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
    const why = isAmbiguousM(bad) ? AMBIGUOUS_M : DURATION_FORMS;
    return list ? `is not a list of durations: ${JSON.stringify(bad.trim())} is no duration; ${why}` : `is not a duration: ${why}`;
  }
  return list && parts.length > 20 ? undefined : 'is out of range';
}
