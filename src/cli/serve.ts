/**
 * `pixiu serve`: runs the service until SIGTERM, SIGINT or SIGHUP, then shuts down gracefully
 * (stop accepting, finish requests in flight, close Redis, the store and the embedded
 * redis-server) and exits 0, or {@link EXIT_UNFINISHED} when the store's close did not
 * end in its time (a stalled disk: src/service/store-close.ts). After SIGTERM, with
 * `PIXIU_DRAIN_DELAY` set, the shutdown waits that long first, `/readyz` answering 503
 * meanwhile (docs/decisions.md, "Drain delay"); a second signal during it ends the
 * delay. A second signal otherwise exits at once with code 1 (the embedded redis-server is told to stop all the same); a repeat
 * within `REPEATED_SIGNAL_MS` of the first is the same request, not a second one
 * (stop-signals.ts).
 */
import path from 'node:path';
import { Command } from 'commander';
import { loadSecrets } from '../auth/secrets.js';
import { checkListenable } from '../service/listen-check.js';
import { bareDurationSettings, unknownSettingVariables } from '../config/config.js';
import type { Service } from '../service/service.js';
import type { LocalRedis } from '../redis/local-server.js';
import { addConfigOptions, configFromOptions, optionOverrides } from './config-options.js';
import { onStopSignals } from './stop-signals.js';
import { StartupError } from '../errors.js';
import { foldersOpenToOthers, keepCreatedFilesPrivate, ROOT_ON_OTHERS_DATA_DIR_LOG, rootOnOthersDataDir } from '../files/private-data.js';
import { CLEARTEXT_JWKS_LOG, cleartextJwksUrl, shownUrl } from '../auth/jwks-fetch.js';
import { UNCHECKED_AUDIENCE_LOG, uncheckedAudienceSource } from '../auth/unchecked-audience.js';

/**
 * The exit code of a shutdown that ran every step but left one undone: the store's
 * close, held past its bound by a stalled disk (src/service/store-close.ts) or failed
 * (an I/O error; shutdown-steps.ts `closeAll`). Not 0, so a
 * supervisor sees the stop was not clean; not 1, which is a failed start, a crash or a
 * second signal. 74 is sysexits.h's EX_IOERR ("an error occurred while doing I/O on
 * some file"). README "Running in production" documents it.
 */
export const EXIT_UNFINISHED = 74;

/** The exit code of a graceful stop whose steps left `unfinished` (service.ts `close`). */
function stopCode(unfinished: readonly string[]): number {
  return unfinished.length === 0 ? 0 : EXIT_UNFINISHED;
}

/** Builds the `serve` subcommand. */
export function serveCommand(): Command {
  const cmd = new Command('serve')
    .description('run the Pixiu service (HTTP ingest API and WebSocket gateway); every option is also an environment variable')
    .addHelpText('after', '\nA flag wins over its environment variable. An empty variable counts as unset: its default applies\n'
      + '(the start-up log line "pixiu listening" names the data dir and Redis in use).');
  addConfigOptions(cmd);
  cmd.action(async () => {
    // Before anything is created: what this process and its redis-server make under the
    // data dir (the AOF holds the cluster secret, LevelDB's files message bodies) is
    // not readable by other users (src/files/private-data.ts).
    keepCreatedFilesPrivate();
    const config = configFromOptions(cmd);
    // Loaded by a start, not with the module: `serve --help`, `pixiu --help` and a
    // mistyped command start without pino, ioredis (under the gateway) and the store.
    const [{ createLogger }, { looseOrigins, nonWebOrigins }, { refuseUnreadableStore }, { redactUrl }] = await Promise.all([
      import('../logger.js'), import('../gateway/connect-route.js'), import('../store/layout.js'), import('../redis/url.js'),
    ]);
    const logger = createLogger(config.logLevel);
    // The first line, at once: loading the service's code and reaching Redis took 8–16 s
    // on a loaded 2-core VM with nothing logged, which an SRE timing a failover took for
    // a wait on stale leases (a black-box SRE's finding). The start's waits each log when
    // they begin, saying for what and how long at most (src/cluster/block-claim.ts,
    // lease-watch.ts).
    logger.info({ dataDir: config.dataDir, redis: config.redisUrl === undefined ? 'embedded' : redactUrl(config.redisUrl) },
      'pixiu starting: loading the service, then connecting to Redis and claiming the store; each wait of the start is logged when it begins');
    const unknown = unknownSettingVariables(process.env);
    if (unknown.length > 0) logger.warn({ variables: unknown }, 'ignoring PIXIU_ variables that name no setting (a typo?); `pixiu serve --help` lists the settings');
    // A body carries a message's JSON and more: the largest messages allowed could not be sent.
    if (config.maxBodyBytes <= config.maxMessageBytes) {
      logger.warn({ maxBodyBytes: config.maxBodyBytes, maxMessageBytes: config.maxMessageBytes },
        'PIXIU_MAX_BODY_BYTES is not above PIXIU_MAX_MESSAGE_BYTES: a message near its limit does not fit in a request body and is refused 413 before it is read');
    }
    const bare = bareDurationSettings(process.env, optionOverrides(cmd));
    if (bare.length > 0) logger.warn({ settings: bare }, 'durations given as a bare number are milliseconds: give them a unit (86400s, 1d, 500ms) to say which you meant');
    const oddOrigins = nonWebOrigins(config.allowedOrigins);
    if (oddOrigins.length > 0) {
      logger.warn({ origins: oddOrigins }, 'PIXIU_ALLOWED_ORIGINS entries that name no web origin (scheme://host[:port]): each allows only an Origin header equal to it (right for chrome-extension://…, a typo otherwise)');
    }
    const looseEntries = looseOrigins(config.allowedOrigins);
    if (looseEntries.length > 0) {
      logger.warn({ origins: looseEntries }, 'PIXIU_ALLOWED_ORIGINS entries with a path, credentials or a wildcard: only their origin (scheme://host[:port]) counts, and * is no wildcard');
    }
    if (config.jwksUrl !== undefined && cleartextJwksUrl(config.jwksUrl)) logger.warn({ url: shownUrl(config.jwksUrl) }, CLEARTEXT_JWKS_LOG);
    const owner = await rootOnOthersDataDir(config.dataDir);
    if (owner !== undefined) logger.warn({ dataDir: config.dataDir, owner }, ROOT_ON_OTHERS_DATA_DIR_LOG);
    const keySource = uncheckedAudienceSource(config);
    if (keySource !== undefined) logger.warn({ keySource }, UNCHECKED_AUDIENCE_LOG);
    const openFolders = await foldersOpenToOthers(config.dataDir);
    if (openFolders.length > 0) {
      logger.warn({ folders: openFolders }, 'data dir folders other users of this machine can read (made by an older release or by hand; the embedded Redis\'s AOF holds the cluster secret, xiu/ the messages): `chmod 700` them; pixiu makes new folders 0700 and leaves these as they are');
    }
    // A store this release cannot read (written by a newer release: src/store/layout.ts),
    // a port in use or a host not this machine's stops the start before anything is
    // generated (startService checks the port again, for its other callers; the layout
    // read here is passed on to it, not read again).
    const layout = await refuseUnreadableStore(path.join(config.dataDir, 'xiu'));
    await checkListenable(config.host, config.port);
    // Secrets are resolved (and generated on a first start) before anything else starts,
    // and shown at once: a start that fails later (Redis unreachable) must not swallow them.
    const secrets = await loadSecrets(config);
    for (const name of secrets.generated) {
      const file = path.join(secrets.dir, name);
      const value = name === 'api-token' ? secrets.apiToken
        : secrets.jwt.kind === 'secret' ? secrets.jwt.secret : '';
      const what = name === 'api-token'
        ? 'API token for producers (Authorization: Bearer <token>)'
        : 'HS256 secret for client JWTs (mint one with `pixiu token <uid>`)';
      process.stderr.write(`pixiu: generated the ${what}; it is kept in ${file} and shown only now:\n  ${value}\n`);
    }
    for (const name of secrets.overridden) {
      logger.warn({ file: path.join(secrets.dir, name) }, name === 'jwt-secret'
        ? 'the client-token key is configured, so this generated jwt-secret is not used; pixiu token and pixiu connect with this data dir sign with it unless given the same key'
        : 'PIXIU_API_TOKEN is set, so this generated api-token is not used');
    }
    let service: Service | undefined;
    let local: LocalRedis | undefined;
    // A crash (an uncaught exception, or a rejection no one handled) still exits 1 with
    // Node's report on stderr; the log gets it too, as one fatal line with its stack.
    // The embedded redis-server runs in a process group of its own: told to stop here
    // (it shuts down on its own, writing its AOF), or the crash would leave it running.
    /** Tells the embedded redis-server to stop now, with or without a started service. */
    const abandon = (): void => {
      if (service !== undefined) service.abandon();
      else local?.terminate();
    };
    process.on('uncaughtExceptionMonitor', (err, origin) => {
      logger.fatal({ err, origin }, 'pixiu crashed');
      abandon();
    });
    // Installed before the start: a signal while it runs (its redis-server already
    // spawned, in a process group of its own) would otherwise kill this process by Node's
    // default action and leave that redis-server running. Such a stop gives the start up,
    // which stops what it started.
    const starting = new AbortController();
    /** Ends the drain delay at once; set while it runs. */
    let drainCut: AbortController | undefined;
    onStopSignals({
      stop: (signal) => {
        // The delay is for an orchestrator's or supervisor's SIGTERM: Ctrl-C (SIGINT) and
        // a terminal gone (SIGHUP) come from a person or no one, and stop at once.
        const drainDelayMs = signal === 'SIGTERM' && service !== undefined ? config.drainDelayMs : 0;
        // With a delay, `drainDelayMs`: /readyz answers 503 for that long, all else is served.
        logger.info({ signal, ...(drainDelayMs > 0 ? { drainDelayMs } : {}) }, 'shutting down');
        if (service !== undefined && drainDelayMs > 0) {
          const running = service;
          const cut = new AbortController();
          drainCut = cut;
          void running.drain(drainDelayMs, cut.signal).then(() => {
            drainCut = undefined;
            logger.info(cut.signal.aborted ? 'drain delay cut short by a second signal, shutting down' : 'drain delay over, shutting down');
            return running.close();
          }).then((unfinished) => process.exit(stopCode(unfinished)));
        } else if (service !== undefined) {
          void service.close().then((unfinished) => process.exit(stopCode(unfinished)));
        } else if (config.redisUrl !== undefined) {
          // No redis-server of ours to stop, and the start may be waiting long (the
          // claims settle time on a shared Redis): stop at once, as before the start.
          logger.info('pixiu stopped');
          process.exit(0);
        } else {
          starting.abort();
        }
      },
      repeated: (signal) => logger.debug({ signal }, 'the same signal again (passed on by npm), shutting down already'),
      force: (signal) => {
        // In the drain delay nothing has been stopped yet: a second signal asks for the
        // graceful shutdown now, not for an exit that skips it (a third one does that).
        if (drainCut !== undefined) {
          logger.debug({ signal }, 'second signal during the drain delay');
          drainCut.abort();
          drainCut = undefined;
          return;
        }
        logger.warn({ signal }, 'second signal, exiting now');
        abandon();
        process.exit(1);
      },
    // SIGHUP too: a terminal that goes away (an ssh session dropped) would otherwise end
    // this process by Node's default action and leave the embedded redis-server running.
    }, ['SIGINT', 'SIGTERM', 'SIGHUP']);
    try {
      // Loaded here, not with the CLI: the service's modules (fastify, ioredis,
      // classic-level) are most of a start-up's time, which every other command saved.
      const { startService } = await import('../service/service.js');
      service = await startService(config, logger, secrets, { signal: starting.signal, onLocalRedis: (l) => { local = l; }, layout });
    } catch (err) {
      // Asked to stop: what the start began is stopped; a graceful stop exits 0.
      if (starting.signal.aborted) {
        logger.info('pixiu stopped');
        process.exit(0);
      }
      // The secrets printed "only now" scrolled up behind the start's output: the last
      // line says where they are, so a failed first start does not lose them.
      if (secrets.generated.length > 0) {
        const files = secrets.generated.map((name) => path.join(secrets.dir, name)).join(' and ');
        throw new StartupError(`${err instanceof Error ? err.message : String(err)}\n`
          + `pixiu: the start failed; the secrets it generated (printed above) are kept in ${files}`, { cause: err });
      }
      throw err;
    }
  });
  return cmd;
}
