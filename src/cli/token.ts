/**
 * `pixiu token <uid> [--tags a,b] [--channels p,q] [--ttl 1h]`: prints a client JWT
 * signed with the configured HS256 key (PIXIU_JWT_SECRET, or the one generated in
 * the data dir), for trying Pixiu out.
 */
import { Command, Option } from 'commander';
import ms from 'ms';
import { resolveJwtKey } from '../auth/secrets.js';
import { mintToken } from '../auth/jwt.js';
import { StartupError } from '../errors.js';
import { addConfigOptions, checkUserId, configFromOptions } from './config-options.js';

/**
 * The longest `--ttl`, seconds: 365 days. A client token is a bearer credential; one
 * meant to outlive a year is better re-minted than trusted that long.
 */
const MAX_TOKEN_TTL_SEC = 365 * 24 * 3600;

function list(text: string | undefined): string[] {
  return (text ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

/** Builds the `token` subcommand. */
export function tokenCommand(): Command {
  const cmd = new Command('token')
    .description('print a client JWT for <uid>, signed with the configured key')
    .argument('<uid>', 'the user id (the token\'s sub)')
    .addOption(new Option('--ttl <duration>', 'lifetime, 1s to 365d, e.g. 30m, 1h, 7d; a bare number is seconds (as a JWT exp)').default('1h'))
    .option('--tags <list>', 'comma-separated broadcast tags')
    .option('--channels <list>', 'comma-separated channel patterns the user may subscribe to');
  addConfigOptions(cmd, ['dataDir', 'jwtSecret', 'jwtPublicKey', 'jwksUrl']);
  cmd.action(async (uid: string) => {
    checkUserId(uid);
    const opts = cmd.opts<{ ttl: string; tags?: string; channels?: string }>();
    const ttlMs = /^\d+$/.test(opts.ttl) ? Number(opts.ttl) * 1000 : (ms(opts.ttl as ms.StringValue) as number | undefined);
    if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs < 1000 || ttlMs > MAX_TOKEN_TTL_SEC * 1000) {
      throw new StartupError(`invalid --ttl ${JSON.stringify(opts.ttl)}: a duration from 1s to 365d, e.g. 30m, 1h, 7d`);
    }
    const config = configFromOptions(cmd, ['dataDir', 'jwtSecret', 'jwtPublicKey', 'jwksUrl']);
    const { source } = await resolveJwtKey(config, { create: false });
    try {
      const token = await mintToken(source, {
        user: uid, ttlSec: Math.floor(ttlMs / 1000), tags: list(opts.tags), channels: list(opts.channels),
      });
      process.stdout.write(`${token}\n`);
    } catch (err) {
      throw new StartupError((err as Error).message, { cause: err });
    }
  });
  return cmd;
}
