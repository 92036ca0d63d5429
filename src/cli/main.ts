#!/usr/bin/env node
/**
 * `pixiu`: the one binary (DESIGN.md §10). Subcommands: `serve`, `token`, `connect`,
 * `inspect`, `redis`.
 * Every subcommand has `--help`. A start-up error prints one clear message and exits 1.
 * Only the subcommand named on the command line is loaded (all of them for anything else:
 * `pixiu --help`, `pixiu help serve`, a typo): `pixiu token` then starts without the
 * modules of the server, Redis and WebSocket clients (~0.2 s less of a 0.45 s run).
 * Each subcommand's module in turn loads what only a run needs (jose, ws, ioredis, pino,
 * the store) in its action, and a setting's schema check is compiled when a value of it
 * is read (src/config/config.ts): `--help`, a refused argument, a mistyped command and
 * `token` start in ~0.3 s of CPU on a 2-core VM instead of 0.45 to 0.8 s.
 */
import { Command } from 'commander';
import { StartupError } from '../errors.js';
import { commandRefusal } from '../redis/command-refusal.js';
import { versionLine } from '../version.js';

/** Each subcommand's module, loaded when it is the one run (or for the full help). */
const SUBCOMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./serve.js')).serveCommand(),
  token: async () => (await import('./token.js')).tokenCommand(),
  connect: async () => (await import('./connect.js')).connectCommand(),
  inspect: async () => (await import('./inspect.js')).inspectCommand(),
  redis: async () => (await import('./redis.js')).redisCommand(),
};

/** True when `name` names one of {@link SUBCOMMANDS}. */
function isSubcommand(name: string | undefined): name is keyof typeof SUBCOMMANDS & string {
  return name !== undefined && Object.hasOwn(SUBCOMMANDS, name);
}

const program = new Command()
  .name('pixiu')
  .description('Pixiu: durable real-time messaging. Backends POST messages; devices get them over WebSocket, live or on reconnect.')
  // The package's version and the commit it was built from (src/version.ts): `0.1.0 (c01b527)`,
  // found only when asked (run from the sources it asks git), as commander's .version() prints.
  .option('-V, --version', 'print the version and the git commit of this build')
  .on('option:version', () => {
    process.stdout.write(`${versionLine()}\n`);
    process.exit(0);
  })
  .showHelpAfterError('(add --help for usage)');

/** The subcommand of `parent` that `word` names (its name or an alias), if any. */
function subcommandOf(parent: Command, word: string): Command | undefined {
  return parent.commands.find((cmd) => cmd.name() === word || cmd.aliases().includes(word));
}

/**
 * The command line to parse: as given, except where a word names no subcommand of a
 * command that has some (`pixiu <name>`, `pixiu inspect <name>`, at any depth): that
 * word is parsed alone after its parent's path — `… <name> --help …` and `… help <name>`
 * as `… <name>` — so that it gets commander's "unknown command" line, its "Did you mean"
 * and exit 1. (Commander would print the parent's usage and exit 0 for `--help` after
 * an unknown command, as if it existed, and its own `help <name>` the usage alone.)
 * `help <name>` naming a subcommand goes on with the words after it, so that
 * `pixiu help inspect nosuch` is `pixiu inspect nosuch`. `help help` is left to
 * commander, as before the walk existed: the usage, exit 1. The walk passes over the
 * help flag (`-h`, `--help`: it takes no value), so that `pixiu --help nosuch` and
 * `pixiu inspect -h nosuch` are unknown commands too, and stops at any other word that
 * starts with `-` (an option's value might follow).
 * After an unknown command the hint names `pixiu --help`, which lists the commands
 * ("add --help" would send the user to what just failed); after an unknown subcommand
 * the parent's help itself follows ({@link nameUnknownSubcommand}).
 * @param root the program, its subcommands added
 * @param argv `process.argv`: node, the script, then the words
 */
function argvToParse(root: Command, argv: readonly string[]): string[] {
  let parent = root;
  const walked: string[] = []; // the subcommands named so far, without any `help`
  for (let i = 2; parent.commands.length > 0; i++) {
    const word = argv[i];
    if (word === '-h' || word === '--help') continue;
    if (word === undefined || word.startsWith('-')) break;
    const name = word === 'help' ? argv[i + 1] : word;
    if (name === undefined || name.startsWith('-') || name === 'help') break;
    if (word === 'help') i++;
    const sub = subcommandOf(parent, name);
    if (sub === undefined) {
      if (walked.length === 0) parent.showHelpAfterError('(`pixiu --help` lists the commands)');
      else nameUnknownSubcommand(parent, ['pixiu', ...walked].join(' '));
      return [...argv.slice(0, 2), ...walked, name];
    }
    walked.push(name);
    parent = sub;
  }
  return [...argv];
}

/**
 * Makes `parent`'s "unknown command" error (commander's, with its "Did you mean")
 * name the word as an unknown subcommand of `path` (`pixiu redis`), and list the
 * valid ones with commander's own help of `parent` after it, on stderr: it said
 * `unknown command 'nosuch'` and only pointed at `pixiu redis --help` (redisrest F6).
 */
function nameUnknownSubcommand(parent: Command, path: string): void {
  parent.showHelpAfterError(true).configureOutput({
    outputError: (text, write) => write(text.replace(/^error: unknown command ('[^']*')/, `error: unknown subcommand $1 of \`${path}\``)),
  });
}

try {
  const named = process.argv[2];
  for (const [name, load] of Object.entries(SUBCOMMANDS)) {
    if (!isSubcommand(named) || name === named) program.addCommand(await load());
  }
  await program.parseAsync(argvToParse(program, process.argv));
} catch (err) {
  if (err instanceof StartupError) {
    process.stderr.write(`pixiu: ${err.message}\n`);
  } else {
    // A command Redis refuses for good (NOPERM, renamed away) is named, not "retry later".
    process.stderr.write(`pixiu: ${commandRefusal(err) ?? (err instanceof Error ? err.message : String(err))}\n`);
  }
  process.exitCode = 1;
}
