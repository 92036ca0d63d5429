/**
 * What a `redis-server` that did not start said of why, from its start-up log: the
 * lines Redis logs at its warning level (`#`; `.` `-` `*` are debug, verbose and
 * notice: redis.conf `loglevel`) less its banner and the host-tuning advice it gives
 * on every start, and
 * any line not in its log format (a config error's block). The whole log, banner,
 * version and the memory-overcommit advice included, was the message of the error an
 * operator got (an ops newcomer's finding); the reason was its last line.
 */

/** A line of Redis's log: `<pid>:<role> <day> <month> <year> <time> <level> <text>`. */
const LOG_LINE = /^\d+:[XCSM] \d{1,2} \w{3} \d{4} [\d:.]+ ([.\-*#]) (.*)$/;

/** `#` lines every start logs: not why it failed. */
const ROUTINE = [
  /oO0OoO0OoO0Oo/,
  /^Redis version=/,
  /^Configuration loaded$/,
  /^Server initialized$/,
  /^WARNING Memory overcommit must be enabled/,
  /^WARNING: The TCP backlog setting/,
  /^WARNING you have Transparent Huge Pages/,
];

/** At most this many lines are kept (the last ones). */
const MAX_LINES = 10;
/** Kept when no line says more: the end of the log. */
const FALLBACK_LINES = 3;

/**
 * The lines of a failed start's log that say why it failed, as text (one a line,
 * Redis's timestamps dropped); the last {@link FALLBACK_LINES} lines as they are when
 * none does.
 * @param log what the server wrote to stdout and stderr before it exited or timed out
 */
export function whyRedisFailed(log: string): string {
  const lines = log.split('\n').map((l) => l.trimEnd()).filter((l) => l.trim() !== '');
  const said: string[] = [];
  for (const line of lines) {
    const m = LOG_LINE.exec(line);
    if (m === null) said.push(line);
    else if (m[1] === '#' && m[2] !== undefined && !ROUTINE.some((r) => r.test(m[2] as string))) said.push(m[2]);
  }
  return (said.length > 0 ? said.slice(-MAX_LINES) : lines.slice(-FALLBACK_LINES)).join('\n');
}
