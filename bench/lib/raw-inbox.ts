/**
 * The raw inbox-script ceiling (bench/README.md, "inbox"): the append script sent with
 * EVALSHA through plain ioredis pipelines, with no Pixiu code around it. Shared by
 * `bench:inbox` (against `Inbox.append`) and `bench:ingest` (against batch ingest).
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { scriptSource } from '../../src/redis/scripts.js';
import { INBOX_RETENTION_GRACE_MS } from '../../src/inbox/inbox.js';
import { SETTINGS } from '../../src/config/settings.js';

/** The default message TTL, ms: the content expiry each raw append carries. */
const CONTENT_TTL_MS = SETTINGS.messageTtlMs.default;

/** One run of raw appends: MsgIDs `ids[from]` until `ids[to]`, to `uidOf(i)`. */
export interface RawAppendRun {
  /** A plain ioredis client (no Pixiu policy). */
  readonly raw: Redis;
  /** From {@link loadRawAppend}. */
  readonly sha: string;
  /** Key prefix, e.g. `raw:`; keys are built here as `<prefix>{<uid>}:<role>`. */
  readonly prefix: string;
  readonly ids: readonly string[];
  readonly uidOf: (i: number) => string;
  readonly from: number;
  readonly to: number;
  /** EVALSHA calls per pipeline. */
  readonly batch: number;
  /** Pipelines in flight at once. */
  readonly pipelinesInFlight: number;
  /** The inbox cap passed to the script. */
  readonly cap: number;
}

/** Loads the append script on `raw`; answers the SHA to call it by. */
export async function loadRawAppend(raw: Redis): Promise<string> {
  return String(await raw.script('LOAD', scriptSource(INBOX_SCRIPTS.append)));
}

/**
 * Runs the appends of `run` and answers the time taken, ms.
 * @throws the first error reply of a pipeline
 */
export async function runRawAppends(run: RawAppendRun): Promise<number> {
  const { raw, sha, prefix, ids, uidOf, to, batch } = run;
  const cap = String(run.cap);
  const keys = INBOX_SCRIPTS.append.numberOfKeys;
  const epoch = 'bench-epoch0';
  const grace = String(INBOX_RETENTION_GRACE_MS);
  const devices = String(SETTINGS.maxDeviceCursors.default);
  let next = run.from;
  const worker = async (): Promise<void> => {
    while (next < to) {
      const first = next;
      next = Math.min(to, next + batch);
      const pipeline = raw.pipeline();
      const now = String(Date.now());
      // What ingest sends: the content's expiry (the default 7-day TTL; the keys' and the entry's `exp`) and the grace.
      const expires = String(Date.now() + CONTENT_TTL_MS);
      for (let i = first; i < next; i++) {
        const tag = `${prefix}{${uidOf(i)}}`;
        pipeline.evalsha(sha, keys, `${tag}:inbox`, `${tag}:meta`, `${tag}:ids`, `${tag}:conns`, `${tag}:acks`, ids[i] ?? '', '1', cap, epoch, now, '', expires, grace, '0', '', devices, expires);
      }
      const results = (await pipeline.exec()) ?? [];
      const failed = results.find(([err]) => err !== null);
      if (failed) throw failed[0];
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: run.pipelinesInFlight }, worker));
  return performance.now() - start;
}
