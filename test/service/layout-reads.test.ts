/**
 * A serving start reads the store's LAYOUT file once (src/store/layout.ts
 * `refuseUnreadableStore`) and passes the layout along to the steps that check or
 * update it — the prefix guard, the claim, the prefix record, the store's open and the
 * `writtenBy` record — instead of each reading it again (the last read found six to
 * eight reads per start). Counted by wrapping `fs.promises.readFile`, which readLayout
 * reads the file with; its writes by wrapping `rename` and `link`, which put a write's
 * temp file in place.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import { startService } from '../../src/service/service.js';
import { tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

type Fn = (...args: unknown[]) => Promise<unknown>;
const fsPromises = createRequire(import.meta.url)('node:fs/promises') as { readFile: Fn; rename: Fn; link: Fn };

test('a serving start reads the LAYOUT once, on a new data dir and on one that has a store, and writes it three times on the first, never on a later one', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const dataDir = await tempDataDir(t);
  const file = path.join(dataDir, 'xiu', 'LAYOUT');
  const reads: string[] = [];
  const writes: string[] = [];
  const { readFile, rename, link } = fsPromises;
  fsPromises.readFile = (...args: unknown[]) => {
    if (args[0] === file) reads.push(new Error('a LAYOUT read').stack ?? '');
    return readFile(...args);
  };
  // A LAYOUT write puts its temp file in place with one of these (src/files/durable-write.ts).
  fsPromises.rename = (...args: unknown[]) => {
    if (args[1] === file) writes.push(new Error('a LAYOUT rename').stack ?? '');
    return rename(...args);
  };
  fsPromises.link = (...args: unknown[]) => {
    if (args[1] === file) writes.push(new Error('a LAYOUT link').stack ?? '');
    return link(...args);
  };
  // The named imports of node:fs/promises (layout.ts's) follow the module's properties.
  syncBuiltinESMExports();
  t.after(() => {
    Object.assign(fsPromises, { readFile, rename, link });
    syncBuiltinESMExports();
  });
  const config = loadConfig({}, { port: '0', logLevel: 'silent', claimsSettleMs: '0', dataDir, redisUrl: redis.url });
  // The first start creates it, pins the claimed base and records the prefix, each
  // write stamped with this build (the review's L1: the writtenBy record wrote a
  // fourth time, not knowing the start's own writes had it); a later start writes none.
  for (const [which, written] of [['the first start', 3], ['a later start', 0]] as const) {
    reads.length = 0;
    writes.length = 0;
    const service = await startService(config, createLogger('silent'));
    await service.close();
    assert.equal(reads.length, 1, `${which} read the LAYOUT ${reads.length} times:\n${reads.join('\n\n')}`);
    assert.equal(writes.length, written, `${which} wrote the LAYOUT ${writes.length} times:\n${writes.join('\n\n')}`);
  }
});
