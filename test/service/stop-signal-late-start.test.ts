/**
 * A stop asked for (serve's SIGTERM) during the store lease write, the last step of
 * the start that waits, still makes startService give up and stop what it started: it
 * resolved with a running service before, and serve, which only asked the start to
 * stop, dropped the signal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/config.js';
import { startService, type Service } from '../../src/service/service.js';
import { embeddedDataDir } from '../harness/embedded-data-dir.js';

test('a stop signal that comes during the store lease write still makes startService give up', { timeout: 60_000 }, async (t) => {
  const dir = await embeddedDataDir(t);
  const config = loadConfig({}, { port: '0', logLevel: 'info', dataDir: dir.dataDir, claimsSettleMs: '0' });
  const starting = new AbortController();
  // The signal arrives while ownership.advertise runs: its 'store lease held' line is
  // written inside that step (stands in for a SIGTERM landing between its Redis calls).
  const sink = new Writable({
    write(chunk: Buffer, _enc, done): void {
      if (chunk.toString().includes('store lease held')) starting.abort();
      done();
    },
  });
  const logger = pino({ level: 'info' }, sink);
  let service: Service | undefined;
  try {
    service = await startService(config, logger, undefined, { signal: starting.signal });
  } catch (err) {
    assert.match(String(err), /stopped by a signal/);
    return;
  } finally {
    if (service !== undefined) await service.close();
  }
  assert.fail(`startService resolved (listening at ${service.url}) although the stop was asked for during its start`);
});
