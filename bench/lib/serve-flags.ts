/**
 * How `npm start` runs `pixiu serve`, so that the benches run the server as a user's
 * `npm start` does: the compiled `dist/cli/main.js` (built first, as the start script
 * builds it), with the node flags of package.json's start script (today: V8's heap
 * growing factor, see docs/decisions.md, "Garbage collection").
 *
 * Why the compiled build and not the TypeScript source under tsx, which the tests run:
 * tsx's transform wraps every function it names in a `__name(fn, "…")` call (esbuild's
 * keepNames), closures made per message included; batch ingest ran 12 – 15 % faster
 * from dist/ in four alternating 8 s runs (2026-12-01, bench/README.md).
 *
 * @throws Error when the start script no longer has the shape
 *   `… exec node [--flag=value …] dist/cli/main.js serve`: the benches would
 *   otherwise measure a server set up unlike the one users run
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, spawnListening, type CleanupContext, type ServeProcess } from '../../test/harness/pixiu-server.js';

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

/** The entry point the start script runs: `dist/cli/main.js`, absolute. */
export const SERVE_MAIN = path.join(REPO_ROOT, 'dist/cli/main.js');

/**
 * The node arguments that run `pixiu serve` as the start script does: its flags,
 * `nodeArgs` (a profiler's, a preload), then {@link SERVE_MAIN} `serve`.
 */
export function serveArgs(nodeArgs: readonly string[] = []): string[] {
  return [...SERVE_NODE_FLAGS, ...nodeArgs, SERVE_MAIN, 'serve'];
}

/**
 * Starts `pixiu serve` as the start script does, after {@link buildServe}: plain
 * `node` (no tsx loader, whose module hooks run a thread of their own) with
 * {@link serveArgs}`(nodeArgs)`. A preload in `nodeArgs` must be JavaScript.
 *
 * @param env added to the environment, as `spawnListening` does
 * @param t the process is SIGKILLed when it runs its clean-ups
 * @throws Error with its output when it exits or stays silent before listening
 */
export function spawnCompiledServe(nodeArgs: readonly string[], env: Record<string, string>, t: CleanupContext): Promise<ServeProcess> {
  return spawnListening(serveArgs(nodeArgs), env, t, 'pixiu listening', { tsx: false });
}

/** How the benches' conditions line names the server: `node <flags> dist/cli/main.js as npm start`. */
export const SERVE_DESCRIPTION = `node ${SERVE_NODE_FLAGS.join(' ')} dist/cli/main.js as npm start`;

/**
 * Builds `dist/` as the start script does (`npm run build`), so {@link SERVE_MAIN} is
 * the code of this tree. Call once before spawning the server; the build's errors go
 * to stderr.
 *
 * @throws Error when the build fails
 */
export function buildServe(): void {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
}
