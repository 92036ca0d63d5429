/**
 * Lua scripts: read once from `.lua` files (copied beside the compiled code by
 * `scripts/copy-assets.mjs`; a `--@include includes/<file>.lua` line replaced by that
 * file: {@link scriptSource}), loaded on every client that uses them ({@link loadScripts})
 * and called by the SHA-1 of their text: {@link evalScript} for a call, {@link inTransaction}
 * for one inside a MULTI, {@link sendEvalsha} on the paths that batch their own commands
 * (src/inbox/tick-pipeline.ts). Every way, a call answered NOSCRIPT (a `SCRIPT FLUSH` on a live connection) is sent
 * again once as a plain EVAL of the script's text ({@link resendOnNoScript}; a
 * transaction is run again with EVAL in it); an EVAL Redis runs loads the script, so later EVALSHAs
 * find it. A changed script is another SHA, so two releases sharing one Redis never run
 * each other's script.
 *
 * Not ioredis `defineCommand` (shared/STYLE.md's way, Pixiu's until now): ioredis 6
 * (`Script`) counts a connection as having a script once it has written one EVAL of it
 * there, also when Redis refused that EVAL and loaded nothing (OOM, READONLY, BUSY …).
 * After a `SCRIPT FLUSH` on a Redis refusing writes, calls of one script made together
 * then went as EVALSHA again, and the one further try ioredis makes raced the others'
 * (written as EVALSHA once another's EVAL marked the connection): some failed NOSCRIPT
 * for good and were answered "Redis is unavailable" instead of naming the full Redis
 * (test/inbox/script-flush-while-full.test.ts, test/cluster/script-flush-every-script.test.ts).
 * A plain EVAL gets Redis's own answer, in one round trip.
 *
 * Each script is loaded (SCRIPT LOAD) when it is given to {@link loadScripts} on a
 * connected client and again whenever the client reconnects, before any command of
 * ours goes out on the new connection (SCRIPT is never auto-pipelined; the `ready`
 * listener runs ahead of the commands queued as the client becomes ready). Without it,
 * the first calls after a Redis restart got NOSCRIPT and were sent again as EVAL — and
 * two appends to one user sent in one go could swap: the first failed NOSCRIPT, another
 * node's EVAL loaded the script, the second went through, then the first's EVAL took the
 * next seq (a fresh review's finding). Only a `SCRIPT FLUSH` on a live connection still
 * takes the EVAL fallback now.
 *
 * Every script opens with a Redis 7 flags line (`#!lua`, `#!lua flags=no-writes`,
 * `#!lua flags=allow-oom`; https://redis.io/docs/latest/develop/interact/programmability/eval-intro/#eval-flags),
 * which Redis reads from the text of an EVAL as from the script an EVALSHA names. With
 * it, a script that may write is refused whole (OOM, before it runs) while Redis is over
 * `maxmemory`, except those flagged `allow-oom`: the ones that only delete, and the ack
 * cursor (ack-7.lua), which writes and so still grows a full Redis (bounded per user by
 * `PIXIU_MAX_DEVICE_CURSORS`, not in total). Without the line Redis checked only the
 * script's first write, and one opening with a DEL went on to grow Redis
 * (docs/decisions.md, "maxmemory").
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Command, type Redis } from 'ioredis';

/** One script: the file it lives in (its header documents KEYS, ARGV and reply). */
export interface ScriptSpec {
  /** The `.lua` file, as a URL (e.g. `new URL('./lua/append-7.lua', import.meta.url)`). */
  readonly file: URL;
  /** How many of its arguments are KEYS. */
  readonly numberOfKeys: number;
}

/** The flags a script's first line may give (Redis 7 `#!lua flags=…`). */
const FLAGS_LINE = /^#!lua(?: flags=((?:no-writes|allow-oom)(?:,(?:no-writes|allow-oom))*))?\n/;

/**
 * The Redis 7 flags of a script, from its `#!lua` first line (empty for `#!lua` alone).
 * @throws Error when the script has no such line, or names a flag Pixiu does not use
 */
export function scriptFlags(spec: ScriptSpec): ReadonlySet<string> {
  const line = FLAGS_LINE.exec(scriptSource(spec));
  if (line === null) throw new Error(`${spec.file.pathname} does not open with a #!lua flags line (src/redis/scripts.ts)`);
  return new Set(line[1]?.split(',') ?? []);
}

/** A script's text and its SHA-1, by file URL. */
const texts = new Map<string, { readonly lua: string; readonly sha: string }>();

/**
 * A line standing for a piece of Lua two scripts share (BullMQ's `--- @include`): the
 * file it names, relative to the script's folder, in its place. One level: an included
 * file's own such lines are left as they are (Lua comments). Included files live in an
 * `includes/` folder and are no scripts (no `#!lua` line, never loaded alone).
 */
const INCLUDE_LINE = /^--@include (includes\/[a-z0-9-]+\.lua)$/gm;

/** The text of `spec` and its SHA-1 (of the text with its includes), read from disk on first use and cached. */
function scriptText(spec: ScriptSpec): { readonly lua: string; readonly sha: string } {
  let text = texts.get(spec.file.href);
  if (text === undefined) {
    const lua = readFileSync(spec.file, 'utf8').replace(INCLUDE_LINE, (_line, name: string) => readFileSync(new URL(name, spec.file), 'utf8').trimEnd());
    text = { lua, sha: createHash('sha1').update(lua).digest('hex') };
    texts.set(spec.file.href, text);
  }
  return text;
}

/** The Lua text of a script, its `--@include` lines replaced (INCLUDE_LINE), read from disk on first use and cached. */
export function scriptSource(spec: ScriptSpec): string {
  return scriptText(spec).lua;
}

/** The SHA-1 that EVALSHA names a script by. */
export function scriptSha(spec: ScriptSpec): string {
  return scriptText(spec).sha;
}

/** The scripts loaded per client, by file URL. */
const loaded = new WeakMap<Redis, Map<string, ScriptSpec>>();

/**
 * Loads scripts on `redis`: now when the client is connected, and again on every
 * reconnect (see the module comment); each once per client, later calls do nothing.
 * Call it when the scripts' user is built. A failed load is ignored: a call then
 * meets NOSCRIPT and is sent again as EVAL ({@link resendOnNoScript}).
 * @throws Error when a script lacks its `#!lua` line (a mistake in the code, found at start)
 */
export function loadScripts(redis: Redis, specs: Iterable<ScriptSpec>): void {
  let done = loaded.get(redis);
  if (done === undefined) {
    const mine = new Map<string, ScriptSpec>();
    done = mine;
    loaded.set(redis, mine);
    // Run as ioredis emits `ready`, before any command issued after it is written.
    redis.on('ready', () => {
      for (const spec of mine.values()) loadScript(redis, spec);
    });
  }
  for (const spec of specs) {
    if (done.has(spec.file.href)) continue;
    scriptFlags(spec);
    done.set(spec.file.href, spec);
    if (redis.status === 'ready') loadScript(redis, spec);
  }
}

/** Sends SCRIPT LOAD for `spec` (written at once: SCRIPT is not auto-pipelined); never rejects. */
function loadScript(redis: Redis, spec: ScriptSpec): void {
  redis.script('LOAD', scriptSource(spec)).catch(() => undefined);
}

/**
 * Runs a script: how a Pixiu script is called, but inside a MULTI ({@link inTransaction})
 * and where a tick pipeline batches the calls ({@link sendEvalsha}). EVALSHA goes out auto-pipelined, as any
 * command of the client (calls made in one tick share one write and reach Redis in the
 * order made: e.g. presence's HDEL of closed connections before its add script); when
 * Redis answers NOSCRIPT, the call is sent again once as a plain EVAL
 * ({@link resendOnNoScript}), written at once.
 * @typeParam R the reply, as the script's header documents it (not checked here)
 * @param keys its KEYS, as many as `spec.numberOfKeys`
 * @param args its ARGV
 * @returns the script's reply; rejects with the client's error (the EVAL's, after
 *   NOSCRIPT), for the caller to map (`redisCall`), or with an Error when `keys` are
 *   not as many as the script takes (a mistake in the code)
 */
export function evalScript<R>(redis: Redis, spec: ScriptSpec, keys: readonly string[], args: readonly string[]): Promise<R> {
  if (keys.length !== spec.numberOfKeys) {
    return Promise.reject(new Error(`${spec.file.pathname} takes ${spec.numberOfKeys} keys, not ${keys.length}`));
  }
  const sha = scriptSha(spec);
  const reply: Promise<unknown> = redis.evalsha(sha, keys.length, ...keys, ...args).catch((err: unknown) => {
    const again = resendOnNoScript(redis, spec, [sha, String(keys.length), ...keys, ...args], err);
    if (again === undefined) throw err;
    return again;
  });
  // The reply's shape is the script's contract (its header), not checked here.
  return reply as Promise<R>;
}

/**
 * A script called inside a MULTI, read as one snapshot with other commands, where the
 * call alone cannot be sent again: `exec` builds and runs the whole transaction, naming
 * the script with `command` and `script` (EVALSHA and the SHA). When that fails
 * NOSCRIPT, the transaction is run once more with EVAL and the script's text, which
 * loads it: {@link evalScript}'s fallback, for a transaction.
 * @returns what `exec` resolves with; rejects with its failure (the second one's, after NOSCRIPT)
 */
export async function inTransaction<T>(spec: ScriptSpec, exec: (command: 'evalsha' | 'eval', script: string) => Promise<T>): Promise<T> {
  try {
    return await exec('evalsha', scriptSha(spec));
  } catch (err) {
    // A transaction's failure is the client's error itself, or one mapped from it (src/redis/client.ts `transaction`).
    if (!isNoScript(err) && !isNoScript(err instanceof Error ? err.cause : undefined)) throw err;
    return exec('eval', scriptSource(spec));
  }
}

/** Command options of {@link sendEvalsha}: replies decoded as UTF-8 strings. */
const UTF8_REPLY = { replyEncoding: 'utf8' } as const;

/**
 * Sends an EVALSHA of a script as one plain ioredis `Command`, for a tick pipeline
 * (src/inbox/tick-pipeline.ts) or a call that must be written at once: `argv` is the
 * whole of it (the SHA from {@link scriptSha}, the number of keys, then KEYS and ARGV),
 * built once by the caller. It is never auto-pipelined and has no NOSCRIPT fallback of
 * its own: the caller sends the call again with {@link resendOnNoScript} (a tick
 * pipeline's `resend`).
 * @returns the raw reply; rejects with the command's failure
 */
export function sendEvalsha(redis: Redis, argv: string[]): Promise<unknown> {
  return sendPlain(redis, 'evalsha', argv);
}

/** Sends `name` with `argv` as one plain `Command` (never auto-pipelined); resolves with the raw reply. */
function sendPlain(redis: Redis, name: 'eval' | 'evalsha', argv: string[]): Promise<unknown> {
  const command = new Command(name, argv, UTF8_REPLY);
  redis.sendCommand(command);
  // ioredis types the promise `any`: it is the raw reply, unknown to the caller.
  const reply: Promise<unknown> = command.promise;
  return reply;
}

/**
 * The NOSCRIPT fallback of a script call ({@link evalScript}'s, a tick pipeline's
 * `resend`, any {@link sendEvalsha}'s), the one place it is written: when `err`
 * (the failure of an EVALSHA with `argv`) is NOSCRIPT (a `SCRIPT FLUSH` on a live
 * connection), sends the call again as EVAL, the SHA in `argv` replaced by `spec`'s
 * text, as one plain ioredis `Command` (written at once, never auto-pipelined). An
 * EVAL Redis runs loads the script, so later EVALSHAs find it; one Redis refuses (OOM,
 * READONLY, BUSY …) answers with that refusal, which names the cause.
 * @param argv the EVALSHA's whole argv (SHA, number of keys, KEYS, ARGV)
 * @returns the EVAL's raw reply (rejects with its failure); undefined when `err` is
 *   not NOSCRIPT, for the caller to fail with `err`
 */
export function resendOnNoScript(redis: Redis, spec: ScriptSpec, argv: readonly string[], err: unknown): Promise<unknown> | undefined {
  if (!isNoScript(err)) return undefined;
  return sendPlain(redis, 'eval', [scriptSource(spec), ...argv.slice(1)]);
}

/** True for Redis's NOSCRIPT error: the script is not loaded (a restart, SCRIPT FLUSH). */
export function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
