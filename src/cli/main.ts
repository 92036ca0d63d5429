#!/usr/bin/env node
/**
 * `pixiu`: the one binary (DESIGN.md §10). Subcommands: `serve`, `token`, `connect`,
 * `inspect`.
 * Every subcommand has `--help`. A start-up error prints one clear message and exits 1.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { StartupError } from '../errors.js';
import { serveCommand } from './serve.js';
import { tokenCommand } from './token.js';
import { inspectCommand } from './inspect.js';
import { connectCommand } from './connect.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const program = new Command()
  .name('pixiu')
  .description('Pixiu: durable real-time messaging. Backends POST messages; devices get them over WebSocket, live or on reconnect.')
  .version(pkg.version)
  .showHelpAfterError('(add --help for usage)')
  .addCommand(serveCommand())
  .addCommand(tokenCommand())
  .addCommand(connectCommand())
  .addCommand(inspectCommand());

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof StartupError) {
    process.stderr.write(`pixiu: ${err.message}\n`);
  } else {
    process.stderr.write(`pixiu: ${err instanceof Error ? err.message : String(err)}\n`);
  }
  process.exitCode = 1;
}
