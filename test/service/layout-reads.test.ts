/**
 * A serving start reads the store's LAYOUT file once (src/store/layout.ts
 * `refuseUnreadableStore`) and passes the layout along to the steps that check or
 * update it — the prefix guard, the claim, the prefix record, the store's open and the
 * `writtenBy` record — instead of each reading it again (the last read found six to
 * eight reads per start). Counted by wrapping `fs.promises.readFile`, which readLayout
 * reads the file with.
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

const fsPromises = createRequire(import.meta.url)('node:fs/promises') as { readFile: (...args: unknown[]) => Promise<unknown> };

test('a serving start reads the LAYOUT once, on a new data dir and on one that has a store', { timeout: 60_000 }, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.destroy());
  const dataDir = await tempDataDir(t);
  const file = path.join(dataDir, 'xiu', 'LAYOUT');
  const reads: string[] = [];
  const readFile = fsPromises.readFile;
  fsPromises.readFile = (...args: unknown[]) => {
    if (args[0] === file) reads.push(new Error('a LAYOUT read').stack ?? '');
    return readFile(...args);
  };
  // The named imports of node:fs/promises (layout.ts's) follow the module's properties.
  syncBuiltinESMExports();
  t.after(() => {
    fsPromises.readFile = readFile;
    syncBuiltinESMExports();
  });
  const config = loadConfig({}, { port: '0', logLevel: 'silent', claimsSettleMs: '0', dataDir, redisUrl: redis.url });
  for (const which of ['the first start', 'a later start']) {
    reads.length = 0;
    const service = await startService(config, createLogger('silent'));
    await service.close();
    assert.equal(reads.length, 1, `${which} read the LAYOUT ${reads.length} times:\n${reads.join('\n\n')}`);
  }
});
