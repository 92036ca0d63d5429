/**
 * A connect that waits for a Redis loading its data (an AOF or RDB read at its start),
 * said once (walk29 F10): ioredis's ready check waits on `INFO`'s `loading:1` on its
 * own, silently — a 377 MB AOF was 9.5 s of a start with no line, though the start's
 * first line promises each of its waits is logged (src/cli/serve.ts), and a production
 * AOF of gigabytes is minutes. `INFO` is one of the commands ioredis sends before the
 * connection is ready (its `loading` flag), so it is asked here, once, when the connect
 * has not become ready soon after the socket connected.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';

/** How long after the socket connected a connect not ready yet is asked why, ms. */
export const LOADING_ASK_MS = 300;

/**
 * Watches `redis`'s connect: when it is still not ready {@link LOADING_ASK_MS} after
 * its socket connected and `INFO persistence` says `loading:1`, logs one info line
 * (`Redis is loading its data …: the start waits until it has`) with the progress and
 * time left Redis gives (`loading_loaded_perc`, `loading_eta_seconds`). Never throws:
 * an `INFO` that fails says nothing.
 * @param fields the line's context (`redis`: the connection's name, `redisUrl`: the URL as logged)
 * @returns stops watching (call once the connect ended, either way)
 */
export function sayLoadingWait(redis: Redis, logger: Logger, fields: Record<string, unknown>): () => void {
  let timer: NodeJS.Timeout | undefined;
  const onConnect = (): void => {
    timer = setTimeout(() => {
      if (redis.status !== 'connect') return;
      redis.info('persistence').then((info) => {
        if (!/^loading:1\r?$/m.test(info)) return;
        const perc = Number(/^loading_loaded_perc:([\d.]+)/m.exec(info)?.[1]);
        const eta = Number(/^loading_eta_seconds:(\d+)/m.exec(info)?.[1]);
        logger.info({ ...fields, ...(Number.isFinite(perc) ? { loadedPerc: perc } : {}), ...(Number.isFinite(eta) ? { etaSeconds: eta } : {}) },
          `Redis is loading its data (its AOF or RDB file${Number.isFinite(perc) ? `, ${perc} % done` : ''}${Number.isFinite(eta) ? `, about ${eta} s left` : ''}): the start waits until it has`);
      }, () => undefined);
    }, LOADING_ASK_MS);
  };
  redis.once('connect', onConnect);
  return () => {
    redis.off('connect', onConnect);
    clearTimeout(timer);
  };
}
