/**
 * Redis refusing a command for good, not for its state: the ACL user of
 * `PIXIU_REDIS_URL` may not run it (`NOPERM this user has no permissions to run the
 * 'info' command`), or the Redis does not know it (`ERR unknown command 'config'`: a
 * managed Redis that renamed or disabled it). Retrying never helps, so a start (and a
 * CLI command) that failed so says which command and what to grant, where it said
 * `Redis is unavailable, retry later` with the NOPERM only in ioredis's console noise
 * (walk24 M2, M3). The ACL a node needs: README "Running with your own Redis".
 */

/** Redis 7's NOPERM for a command (server.c `addACLLogEntry` … "no permissions to run the '%s' command"). */
const NOPERM_COMMAND = /^NOPERM (?:this user|User \S+) has no permissions to run the '([^']+)' command/;
/** Redis 7's NOPERM for a key or channel outside the user's patterns. */
const NOPERM_OTHER = /^NOPERM (?:this user|User \S+) has no permissions to access (?:one of the )?(keys|channels|the '[^']*' key|the '[^']*' channel)/;
/** Redis 7's reply to a command it does not know (renamed away, or disabled). */
const UNKNOWN_COMMAND = /^ERR unknown (?:sub)?command '([^']+)'/;

/** How Redis refused a command for good (see {@link refusalOf}). */
export interface Refusal {
  /**
   * `not-allowed`: the ACL user may not run the command (NOPERM); `no-access`: nor
   * touch those keys or channels (NOPERM); `unknown`: this Redis does not know the
   * command (renamed away or disabled).
   */
  readonly kind: 'not-allowed' | 'no-access' | 'unknown';
  /** The plain words: the command (`info`, `config|get`), the ACL rule to grant (`+info`) or that it is renamed away. */
  readonly words: string;
}

/**
 * The refusal for good (see above) that Redis's error reply `message` is
 * (`NOPERM this user has no permissions to run the 'config|get' command`, `ERR
 * unknown command 'config'`); undefined for any other reply or failure (a timeout, a
 * closed connection, LOADING: those may pass).
 */
export function refusalOf(message: string): Refusal | undefined {
  const noperm = NOPERM_COMMAND.exec(message);
  if (noperm !== null) {
    const command = noperm[1] ?? '';
    return {
      kind: 'not-allowed',
      words: `Redis refuses the command ${command.toUpperCase().replace('|', ' ')} to the ACL user of PIXIU_REDIS_URL (NOPERM): `
        + `grant it (ACL SETUSER <user> +${command.toLowerCase()}), or give the user the ACL the README lists (for serve: "Running with your own Redis"; for inspect cluster: "Commands"); `
        + 'retrying will not help',
    };
  }
  const other = NOPERM_OTHER.exec(message);
  if (other !== null) {
    return {
      kind: 'no-access',
      words: `Redis refuses the ACL user of PIXIU_REDIS_URL access to ${other[1] ?? 'keys'} (NOPERM): grant it every key and channel (~* &*), `
        + 'as README "Running with your own Redis" says; retrying will not help',
    };
  }
  const unknown = UNKNOWN_COMMAND.exec(message);
  if (unknown !== null) {
    return {
      kind: 'unknown',
      words: `Redis does not know the command ${(unknown[1] ?? '').toUpperCase()} (renamed or disabled, as managed Redis services do?): `
        + 'Pixiu needs it (README "Running with your own Redis" lists the commands a node sends); retrying will not help',
    };
  }
  return undefined;
}

/**
 * The plain words for `err` when it is, or was caused by (`cause`, a MULTI's
 * `previousErrors`), Redis refusing a command for good ({@link refusalOf}); undefined
 * for any other error.
 */
export function commandRefusal(err: unknown): string | undefined {
  for (const message of messagesOf(err, 4)) {
    const refusal = refusalOf(message);
    if (refusal !== undefined) return refusal.words;
  }
  return undefined;
}

/** The messages of `err`, its `previousErrors` and its causes, `depth` causes deep. */
function messagesOf(err: unknown, depth: number): string[] {
  if (depth === 0 || err === null || typeof err !== 'object') return [];
  const e = err as { message?: unknown; previousErrors?: unknown; cause?: unknown };
  const own = typeof e.message === 'string' ? [e.message] : [];
  const previous = Array.isArray(e.previousErrors) ? e.previousErrors.flatMap((p: unknown) => messagesOf(p, 1)) : [];
  return [...own, ...previous, ...messagesOf(e.cause, depth - 1)];
}
