#!/usr/bin/env node
/**
 * `pixiu`: the one binary (DESIGN.md §10). Subcommands: `serve`, `token`, `connect`,
 * `inspect`.
 * Every subcommand has `--help`. A start-up error prints one clear message and exits 1.
 * Only the subcommand named on the command line is loaded (all four for anything else:
 * `pixiu --help`, `pixiu help serve`, a typo): `pixiu token` then starts without the
 * modules of the server, Redis and WebSocket clients (~0.2 s less of a 0.45 s run).
 */
import { Command } from 'commander';
import { StartupError } from '../errors.js';
import { versionLine } from '../version.js';

/** Each subcommand's module, loaded when it is the one run (or for the full help). */
const SUBCOMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./serve.js')).serveCommand(),
  token: async () => (await import('./token.js')).tokenCommand(),
  connect: async () => (await import('./connect.js')).connectCommand(),
  inspect: async () => (await import('./inspect.js')).inspectCommand(),
};

/** True when `name` names one of {@link SUBCOMMANDS}. */
function isSubcommand(name: string | undefined): name is keyof typeof SUBCOMMANDS & string {
  return name !== undefined && Object.hasOwn(SUBCOMMANDS, name);
}

const program = new Command()
  .name('pixiu')
  .description('Pixiu: durable real-time messaging. Backends POST messages; devices get them over WebSocket, live or on reconnect.')
  // The package's version and the commit it was built from (src/version.ts): `0.1.0 (c01b527)`.
  .version(versionLine(), '-V, --version', 'print the version and the git commit of this build')
  .showHelpAfterError('(add --help for usage)');

/** True when `word` is a command-line word naming no subcommand (nor `help`), not an option. */
function isUnknownCommand(word: string | undefined): word is string {
  return word !== undefined && !word.startsWith('-') && word !== 'help' && !isSubcommand(word);
}

/**
 * The command line to parse: as given, except for a first word that names no
 * subcommand, which is parsed alone — `pixiu <name> --help …` and `pixiu help <name>`
 * as `pixiu <name>` — so that it gets commander's "unknown command" line, its "Did you
 * mean" and exit 1. (Commander would print the general usage and exit 0 for `--help`
 * after an unknown command, as if it existed, and its own `help <name>` the general
 * usage alone.)
 */
function argvToParse(argv: readonly string[]): string[] {
  const [asked, name] = [argv[2], argv[3]];
  if (isUnknownCommand(asked)) return [...argv.slice(0, 2), asked];
  return asked === 'help' && isUnknownCommand(name) ? [...argv.slice(0, 2), name] : [...argv];
}

try {
  const named = process.argv[2];
  for (const [name, load] of Object.entries(SUBCOMMANDS)) {
    if (!isSubcommand(named) || name === named) program.addCommand(await load());
  }
  await program.parseAsync(argvToParse(process.argv));
} catch (err) {
  if (err instanceof StartupError) {
    process.stderr.write(`pixiu: ${err.message}\n`);
  } else {
    process.stderr.write(`pixiu: ${err instanceof Error ? err.message : String(err)}\n`);
  }
  process.exitCode = 1;
}
