/**
 * Lua scripts: read once from `.lua` files (copied beside the compiled code by
 * `scripts/copy-assets.mjs`) and registered on a client with ioredis `defineCommand`,
 * which sends EVALSHA and falls back to EVAL on NOSCRIPT (shared/STYLE.md, "Redis:
 * scripts and keys").
 *
 * Command names carry a version (`pxAppendV2`): bump it whenever a script's KEYS, ARGV
 * or reply changes, so two releases sharing one Redis never call each other's script
 * with the wrong contract.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Command, type Redis } from 'ioredis';

/** One script: the file it lives in and the command it is registered as. */
export interface ScriptSpec {
  /** ioredis command name, versioned. */
  readonly command: string;
  /** The `.lua` file, as a URL (e.g. `new URL('./lua/append-4.lua', import.meta.url)`). */
  readonly file: URL;
  /** How many of the arguments are KEYS. */
  readonly numberOfKeys: number;
  /** True for scripts that never write (lets a cluster client read from replicas). */
  readonly readOnly: boolean;
}

const sources = new Map<string, string>();

/** The Lua text of a script, read from disk on first use and cached. */
export function scriptSource(spec: ScriptSpec): string {
  let lua = sources.get(spec.file.href);
  if (lua === undefined) {
    lua = readFileSync(spec.file, 'utf8');
    sources.set(spec.file.href, lua);
  }
  return lua;
}

/** The SHA-1 that EVALSHA names a script by. */
export function scriptSha(spec: ScriptSpec): string {
  return createHash('sha1').update(scriptSource(spec)).digest('hex');
}

const defined = new WeakMap<Redis, Set<string>>();

/**
 * Registers scripts on `redis` (each once per client; later calls do nothing).
 * Nothing is sent to Redis until first use.
 */
export function defineScripts(redis: Redis, specs: Iterable<ScriptSpec>): void {
  let done = defined.get(redis);
  if (done === undefined) {
    done = new Set();
    defined.set(redis, done);
  }
  for (const spec of specs) {
    if (done.has(spec.command)) continue;
    redis.defineCommand(spec.command, { lua: scriptSource(spec), numberOfKeys: spec.numberOfKeys, readOnly: spec.readOnly });
    done.add(spec.command);
  }
}

/** Command options of {@link sendEvalsha}: replies decoded as UTF-8 strings. */
const UTF8_REPLY = { replyEncoding: 'utf8' } as const;

/**
 * Sends an EVALSHA of a script as one plain ioredis `Command`, for a hot path: `argv` is
 * the whole of it (the SHA from {@link scriptSha}, the number of keys, then KEYS and
 * ARGV), built once by the caller. A command registered by {@link defineScripts} copies
 * its arguments twice, wraps the command in a subclass with a closure and adds a
 * promise for its NOSCRIPT fallback, per call; this has none of that, so the caller
 * must handle NOSCRIPT itself ({@link isNoScript}), e.g. by calling the registered
 * command once, which sends EVAL and so loads the script.
 * @returns the raw reply; rejects with the command's failure
 */
export function sendEvalsha(redis: Redis, argv: string[]): Promise<unknown> {
  const command = new Command('evalsha', argv, UTF8_REPLY);
  redis.sendCommand(command);
  // ioredis types the promise `any`: it is the raw reply, unknown to the caller.
  const reply: Promise<unknown> = command.promise;
  return reply;
}

/** True for Redis's NOSCRIPT error: the script is not loaded (a restart, SCRIPT FLUSH). */
export function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
