/**
 * What the wrong-type key tests share (test/rooms, test/broadcast and test/channels
 * `wrong-type-key.test.ts`; src/redis/wrong-type.ts): the real service in this process
 * on a private redis-server under a key prefix of the test's, its log captured, and a
 * connection of the test's own to that Redis to give a key another type.
 */
import { after, before } from 'node:test';
import type { Redis } from 'ioredis';
import type { Service } from '../../src/service/service.js';
import { cleanupList, startInProcessAlone, type PixiuClient } from './pixiu-server.js';
import { openInbox } from './checks.js';
import { capturingLogger, type LogLine } from './log-capture.js';

/** The started service: valid inside a test. */
export interface WrongTypeService {
  readonly service: Service;
  /** Its HTTP API, with the API token. */
  readonly client: PixiuClient;
  /** A connection of the test's own to the service's Redis. */
  readonly raw: Redis;
  readonly redisUrl: string;
  /** Every line the service logged, in order. */
  readonly lines: LogLine[];
}

/** An error line whose `err` is a WrongTypeKeys: the owner, and each key with its type and the expected one. */
export type WrongTypeLine = LogLine & {
  err: { message: string; user?: string; room?: string; channel?: string; keys: Array<{ key: string; type: string; expected: string }> };
};

/**
 * Starts the service before the file's tests and stops it after them.
 * @param prefix the service's PIXIU_REDIS_PREFIX
 * @returns a getter of what was started (valid inside a test)
 */
export function wrongTypeService(prefix: string): () => WrongTypeService {
  const files = cleanupList();
  let started: WrongTypeService | undefined;
  before(async () => {
    const captured = capturingLogger();
    const { redis, server } = await startInProcessAlone(files, { redisPrefix: prefix }, captured.logger);
    const { redis: raw } = await openInbox(files, redis.url, prefix);
    started = { service: server.service, client: server.client, raw, redisUrl: redis.url, lines: captured.lines };
  });
  after(() => files.run());
  return () => {
    if (started === undefined) throw new Error('the service is started before the tests');
    return started;
  };
}

/** The lines of `lines` from index `from` on logged at error with message `msg`. */
export function errorLinesFrom(lines: readonly LogLine[], from: number, msg: string): WrongTypeLine[] {
  return lines.slice(from).filter((l) => l.level === 50 && l.msg === msg) as WrongTypeLine[];
}
