/**
 * `pixiu token <uid> [--tags a,b] [--channels p,q] [--ttl 1h]`: prints a client JWT
 * signed with the configured HS256 key (PIXIU_JWT_SECRET, or the one generated in
 * the data dir), for trying Pixiu out.
 */
import { maxHeaderSize } from 'node:http';
import { Command, Option } from 'commander';
import { AMBIGUOUS_M, isAmbiguousM, msOf } from '../config/duration.js';
import { resolveJwtKey } from '../auth/secrets.js';
import { StartupError } from '../errors.js';
import { checkClaims, fitsRequestHeaders, listOption } from './claims.js';
import { CLI_USER_ID_RULE, addConfigOptions, checkUserId, configFromOptions } from './config-options.js';
import type { SettingKey } from '../config/settings.js';

/**
 * The longest `--ttl`, seconds: 365 days. A client token is a bearer credential; one
 * meant to outlive a year is better re-minted than trusted that long.
 */
const MAX_TOKEN_TTL_SEC = 365 * 24 * 3600;

/** The bytes of a `refresh` frame around its token: `{"t":"refresh","token":""}`. */
const REFRESH_FRAME_OVERHEAD = 26;

/**
 * The settings `pixiu token` reads (only these: configFromOptions): the key to sign
 * with, the `aud`/`iss` to put in, and the client frame limit a refresh frame carrying
 * the token must fit (its warning).
 */
const TOKEN_SETTINGS: readonly SettingKey[] = ['dataDir', 'jwtSecret', 'jwtPublicKey', 'jwksUrl', 'jwtAudience', 'jwtIssuer', 'maxClientFrameBytes'];

/** Builds the `token` subcommand. */
export function tokenCommand(): Command {
  const cmd = new Command('token')
    .description('print a client JWT for <uid>, signed with the configured key')
    .argument('<uid>', `the user id (the token's sub): ${CLI_USER_ID_RULE}`)
    .addOption(new Option('--ttl <duration>', 'lifetime, 1s to 365d in whole seconds (a JWT exp has no fractions: 1500ms is refused, not rounded), e.g. 30m, 1h, 7d; a bare number is seconds (as a JWT exp)').default('1h'))
    .option('--tags <list>', 'comma-separated broadcast tags')
    .option('--channels <list>', 'comma-separated channel patterns the user may subscribe to');
  addConfigOptions(cmd, TOKEN_SETTINGS);
  cmd.action(async (uid: string) => {
    checkUserId(uid);
    const opts = cmd.opts<{ ttl: string; tags?: string; channels?: string }>();
    const ttlMs = /^\d+$/.test(opts.ttl) ? Number(opts.ttl) * 1000 : msOf(opts.ttl);
    // A whole number of seconds: a token's `exp` has none smaller, and rounding would
    // mint a token living shorter (or longer) than asked.
    if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs < 1000 || ttlMs > MAX_TOKEN_TTL_SEC * 1000 || ttlMs % 1000 !== 0) {
      const m = isAmbiguousM(opts.ttl) ? ` (${AMBIGUOUS_M})` : '';
      throw new StartupError(`invalid --ttl ${JSON.stringify(opts.ttl)}: a whole number of seconds from 1s to 365d, e.g. 30m, 1h, 7d${m}`);
    }
    const tags = listOption(opts.tags, '--tags');
    const channels = listOption(opts.channels, '--channels');
    checkClaims(tags, channels);
    const config = configFromOptions(cmd, TOKEN_SETTINGS);
    const { source } = await resolveJwtKey(config, { create: false });
    // jose is loaded here, not with the module: `--help` and a refused option start without it.
    const { mintToken } = await import('../auth/mint-token.js');
    let token: string;
    try {
      token = await mintToken(source, { user: uid, ttlSec: ttlMs / 1000, tags, channels, audience: config.jwtAudience, issuer: config.jwtIssuer });
    } catch (err) {
      throw new StartupError((err as Error).message, { cause: err });
    }
    process.stdout.write(`${token}\n`);
    // The request line and headers of a connect are held to Node's header limit (431
    // past it), and a client's `refresh` frame to the client frame limit (1009).
    const tokenBytes = Buffer.byteLength(token);
    const frameBytes = tokenBytes + REFRESH_FRAME_OVERHEAD;
    if (!fitsRequestHeaders(token)) {
      process.stderr.write(`pixiu token: warning: this token is ${tokenBytes} bytes, too big for the service's limit of ${maxHeaderSize} bytes on a request's headers: no connect or /v1/me request can carry it (431); use fewer --channels or --tags\n`);
    } else if (frameBytes > config.maxClientFrameBytes) {
      process.stderr.write(`pixiu token: warning: a refresh frame carrying this token is ${frameBytes} bytes, over the client frame limit of ${config.maxClientFrameBytes} bytes (PIXIU_MAX_CLIENT_FRAME_BYTES): a connection can use it at connect but not send it in a refresh (closed 1009); fewer --channels or --tags, or a higher limit on the service\n`);
    }
  });
  return cmd;
}
