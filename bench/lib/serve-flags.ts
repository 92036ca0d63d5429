/**
 * The node flags `npm start` gives `pixiu serve`, read from package.json's start
 * script, so that the benches run the server as a user's `npm start` does (today:
 * V8's heap growing factor, see docs/decisions.md, "Garbage collection").
 *
 * @throws Error when the start script no longer has the shape
 *   `… exec node [--flag=value …] dist/cli/main.js serve`: the benches would
 *   otherwise measure a server set up unlike the one users run
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../test/harness/pixiu-server.js';

const START = /\bexec node((?: --[a-z0-9-]+(?:=\S+)?)*) dist\/cli\/main\.js serve\b/;

/** The flags between `node` and the script in package.json's start script. */
export function serveNodeFlags(): string[] {
  const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts?: { start?: string } };
  const start = pkg.scripts?.start ?? '';
  const match = START.exec(start);
  if (match === null) throw new Error(`package.json's start script is not "… exec node [flags] dist/cli/main.js serve": ${start}`);
  return (match[1] ?? '').trim().split(' ').filter(Boolean);
}

/** {@link serveNodeFlags}, read once when a bench loads. */
export const SERVE_NODE_FLAGS: readonly string[] = serveNodeFlags();
