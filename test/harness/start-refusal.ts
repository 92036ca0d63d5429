/**
 * A start that a test expects to be refused (a Redis user without a grant, a command
 * renamed away, a database Redis lacks): {@link startInProcess}'s start, its error
 * answered instead of thrown.
 */
import type { ConfigOverrides } from '../../src/config/config.js';
import type { Logger } from '../../src/logger.js';
import { startInProcess, type CleanupContext, type InProcessServer } from './pixiu-server.js';

/**
 * Starts the service in this process as {@link startInProcess} does (temp data dir,
 * port 0, no claims wait unless `overrides` sets `claimsSettleMs`, closed when the test
 * ends) and answers what the start threw (a `StartupError` for a refusal), or
 * `undefined` when it started, closed at once then: a start that should have failed
 * ends on the test's assertion with no node left running.
 * @param logger where the service logs (a test reading its lines: log-capture.ts); else none
 * @throws what the service's close throws, after a start that was not refused
 */
export async function startRefusal(
  t: CleanupContext, overrides: ConfigOverrides & { redisUrl: string }, logger?: Logger,
): Promise<Error | undefined> {
  let started: InProcessServer;
  try {
    started = await startInProcess(t, overrides, logger);
  } catch (err) {
    return err as Error;
  }
  await started.service.close();
  return undefined;
}
