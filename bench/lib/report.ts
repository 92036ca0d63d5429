/**
 * Bench output helpers: every bench prints a table of its figures, then, as its last
 * line, one JSON object `{name, value, unit, limit, ratio}` for its headline case,
 * where `limit` is the raw ceiling measured in the same run and `ratio = value / limit`.
 * Benches print; they never assert a time.
 */
import os from 'node:os';

/** One measured figure. */
export interface Figure {
  /** What was measured, e.g. `put, concurrency 100`. */
  readonly case: string;
  readonly value: number;
  /** e.g. `msg/s`, `ms` */
  readonly unit: string;
  /** Conditions worth reading beside the figure (sizes, counts). */
  readonly note?: string;
}

/** Prints the conditions of the run: date, Node, CPU, cores. */
export function printConditions(extra: Record<string, string | number> = {}): void {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  const facts = { date: new Date().toISOString().slice(0, 10), node: process.version, cpu, cores: os.cpus().length, ...extra };
  console.log(Object.entries(facts).map(([k, v]) => `${k}: ${v}`).join(' · '));
}

/** Prints figures as an aligned table. */
export function printTable(figures: readonly Figure[]): void {
  const rows = figures.map((f) => [f.case, formatNumber(f.value), f.unit, f.note ?? '']);
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]?.length ?? 0), 4));
  for (const r of rows) {
    console.log(`${(r[0] ?? '').padEnd(widths[0] ?? 0)}  ${(r[1] ?? '').padStart(widths[1] ?? 0)}  ${(r[2] ?? '').padEnd(widths[2] ?? 0)}  ${r[3] ?? ''}`.trimEnd());
  }
}

/** Prints the last line: the headline figure against its ceiling. */
export function printHeadline(name: string, value: number, unit: string, limit: number): void {
  const ratio = limit > 0 ? value / limit : 0;
  console.log(JSON.stringify({ name, value: round(value), unit, limit: round(limit), ratio: Math.round(ratio * 1000) / 1000 }));
}

/** Rate in items per second for `count` items over `ms` milliseconds. */
export function perSecond(count: number, ms: number): number {
  return ms > 0 ? (count * 1000) / ms : 0;
}

function round(n: number): number {
  return n >= 100 ? Math.round(n) : Math.round(n * 100) / 100;
}

function formatNumber(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : (Math.round(n * 100) / 100).toString();
}
