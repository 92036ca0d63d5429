/**
 * The inbox's Lua scripts: read once from `lua/*.lua` (copied beside the compiled code
 * by `scripts/copy-assets.mjs`) and registered on a client with ioredis
 * `defineCommand`, which sends EVALSHA and falls back to EVAL on NOSCRIPT
 * (shared/STYLE.md, "Redis: scripts and keys").
 *
 * Command names carry a version (`pxAppendV1`): bump it whenever a script's KEYS, ARGV
 * or reply changes, so two releases sharing one Redis never call each other's script
 * with the wrong contract.
 */
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { Redis, Result } from 'ioredis';

/** One script: the file it lives in and the command it is registered as. */
export interface ScriptSpec {
  /** ioredis command name, versioned. */
  readonly command: string;
  /** File name under `src/inbox/lua/`: verb-numberOfKeys. */
  readonly file: string;
  /** How many of the arguments are KEYS. */
  readonly numberOfKeys: number;
  /** True for scripts that never write (lets a cluster client read from replicas). */
  readonly readOnly: boolean;
}

/** The inbox scripts; each file's header documents its KEYS, ARGV and reply. */
export const INBOX_SCRIPTS = {
  append: { command: 'pxAppendV1', file: 'append-3.lua', numberOfKeys: 3, readOnly: false },
  range: { command: 'pxRangeV1', file: 'range-2.lua', numberOfKeys: 2, readOnly: true },
  ack: { command: 'pxAckV1', file: 'ack-1.lua', numberOfKeys: 1, readOnly: false },
} as const satisfies Record<string, ScriptSpec>;

/** Arguments of `append-3.lua`: KEYS inbox, meta, ids; ARGV msgId, kind, cap, epoch, nowMs, room. */
export type AppendArgs = [
  inbox: string, meta: string, ids: string,
  msgId: string, kind: string, cap: string, epoch: string, nowMs: string, room: string,
];

/** Reply of `append-3.lua`: seq, epoch, 1 when the MsgID was already there. */
export type AppendReply = [seq: number, epoch: string, dup: number];

/** One raw stream entry: `["<seq>-0", [field, value, ...]]`. */
export type RawStreamEntry = [id: string, fields: string[]];

/** Reply of `range-2.lua`: epoch ("" when none), first seq, latest seq, entries. */
export type RangeReply = [epoch: string, firstSeq: number, latestSeq: number, entries: RawStreamEntry[]];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** `append-3.lua`: KEYS inbox, meta, ids; ARGV msgId, kind, cap, epoch, nowMs, room. */
    pxAppendV1(...args: AppendArgs): Result<AppendReply, Context>;
    /** `range-2.lua`: KEYS inbox, meta; ARGV afterSeq, limit. */
    pxRangeV1(inbox: string, meta: string, afterSeq: string, limit: string): Result<RangeReply, Context>;
    /** `ack-1.lua`: KEYS acks; ARGV device, seq. Returns the cursor after. */
    pxAckV1(acks: string, device: string, seq: string): Result<number, Context>;
  }
}

const sources = new Map<string, string>();

/** The Lua text of a script, read from disk on first use and cached. */
export function scriptSource(spec: ScriptSpec): string {
  let lua = sources.get(spec.file);
  if (lua === undefined) {
    lua = readFileSync(new URL(`./lua/${spec.file}`, import.meta.url), 'utf8');
    sources.set(spec.file, lua);
  }
  return lua;
}

/** The SHA-1 that EVALSHA names a script by. */
export function scriptSha(spec: ScriptSpec): string {
  return createHash('sha1').update(scriptSource(spec)).digest('hex');
}

const defined = new WeakSet<Redis>();

/**
 * Registers every inbox script on `redis` (once per client; later calls do nothing).
 * Makes `redis.pxAppendV1` and friends callable; nothing is sent to Redis until first
 * use.
 */
export function defineInboxScripts(redis: Redis): void {
  if (defined.has(redis)) return;
  for (const spec of Object.values(INBOX_SCRIPTS)) {
    redis.defineCommand(spec.command, { lua: scriptSource(spec), numberOfKeys: spec.numberOfKeys, readOnly: spec.readOnly });
  }
  defined.add(redis);
}
