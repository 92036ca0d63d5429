/**
 * What a start that failed on a Redis stall says (walk30 F1): the step it was in and
 * the Redis, where the failure said only the API's `Redis did not answer within the
 * command timeout …; retry later`. The start's steps are named by service.ts
 * `startService`, in the words of its `pixiu starting` line (src/cli/serve.ts).
 */
import { StartupError } from '../errors.js';
import { isCommandTimeout, stalledOnConnect } from '../redis/client.js';

/**
 * The start's failure for `err` when it, or an error it was caused by, is a Redis
 * stall: a connection made and its first command not answered (client.ts
 * `stalledOnConnect`) or a command past the command timeout; undefined for any other.
 * @param step the step that failed, as a gerund phrase (`claiming the store`)
 * @param shownUrl the Redis URL without its password (url.ts `redactUrl`)
 * @param commandTimeoutMs `PIXIU_REDIS_COMMAND_TIMEOUT`, ms
 * @returns `the start failed while <step> (Redis at <url> did not answer within the
 *   command timeout, <ms> ms): start it again once Redis answers`
 */
export function startStallFailure(err: unknown, step: string, shownUrl: string, commandTimeoutMs: number): StartupError | undefined {
  let connect = false;
  let timedOut = false;
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    connect ||= stalledOnConnect(e);
    timedOut ||= isCommandTimeout(e);
  }
  if (!connect && !timedOut) return undefined;
  const what = connect ? 'took the connection but did not answer' : 'did not answer';
  return new StartupError(`the start failed while ${step} (Redis at ${shownUrl} ${what} within the command timeout, ${commandTimeoutMs} ms): `
    + 'start it again once Redis answers', { cause: err });
}
