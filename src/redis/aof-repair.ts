/**
 * What to do when the embedded redis-server refuses to start on a damaged append-only
 * file (AOF). Redis's own log ends "use ./redis-check-aof --fix <filename.manifest>",
 * naming neither the file nor what the fix costs; this says both (docs/decisions.md,
 * "Embedded Redis").
 */
import path from 'node:path';

/**
 * The AOF folder under the embedded Redis's dir (`appenddirname` in storage/redis.conf)
 * and its manifest (Redis's name for it: the default `appendfilename`, then `.manifest`).
 */
const AOF_DIR = 'appendonly';
const AOF_MANIFEST = 'appendonly.aof.manifest';

/**
 * The repair advice for a redis-server that exited with `log`, or undefined when the
 * log does not say its AOF is damaged (Redis points at redis-check-aof when it does:
 * a bad format, an unexpected end of an AOF that is not the last, a bad manifest).
 * @param redisDir the embedded Redis's dir, `<data dir>/redis`
 */
export function aofRepairAdvice(log: string, redisDir: string): string | undefined {
  if (!/redis-check-aof/.test(log)) return undefined;
  const aofDir = path.join(redisDir, AOF_DIR);
  return `the embedded Redis's append-only file in ${aofDir} is damaged. Stop Pixiu (a running node keeps restarting its Redis), copy that folder aside, then run `
    + `\`redis-check-aof --fix ${path.join(aofDir, AOF_MANIFEST)}\` and start again. --fix truncates the file at the damage: `
    + 'what Redis recorded after that point is lost — inbox entries (their messages stay in the store, unreachable through the inbox), '
    + 'acks, room members —, and a device that comes back with a last_seq past its inbox\'s new end gets a `reset`. '
    + '--fix mends only the last file the manifest lists: when it says it cannot truncate a file that is not the last, '
    + 'restore the folder from a backup (docs/decisions.md, "Embedded Redis")';
}
