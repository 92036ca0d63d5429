/**
 * `pixiu connect <uid>`: a small WebSocket client for trying Pixiu out and for ops.
 * It mints its own token with the configured key (or, with `--token`, uses a JWT minted
 * elsewhere: deployments whose tokens are verified with a public key or JWKS), connects, prints every frame as a
 * JSON line on stdout, acks what it receives, and on exit (Ctrl-C, `--count`, or the
 * server closing) prints `{"last_seq", "epoch"}` — the values to resume with. With
 * `--sub` it also follows channels (docs/protocol.md, "Channels") once welcomed, and
 * prints the `subscribed` answers and `pub` frames like the others. It exits
 * 0 when it closed the connection itself, 1 when the server did (4002, 4001, 1001, …).
 * When the upgrade is refused or nothing answers, it prints one error line and exits 1,
 * with no close and no exit line: there was no connection to resume.
 *
 * A connection silent for twice `heartbeat` (a half-open link) is said so on stderr and
 * dropped (1006, exit 1, the exit line printed: silence-watch.ts). It never reconnects.
 *
 * SIGINT or SIGTERM closes the connection (1000 bye) and waits up to 5 s for the
 * server's answer (then drops the socket: 1006, exit 1, `closed 1006` saying it gave up
 * waiting); a repeat within `REPEATED_SIGNAL_MS` is the same request, a later one stops
 * at once (1006, exit 1, saying so). Either way the exit line is printed.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { Command, Option } from 'commander';
import { resolveJwtKey } from '../auth/secrets.js';
import { StartupError } from '../errors.js';
import { CLI_USER_ID_RULE, CLIENT_DOCS, addConfigOptions, checkUserId, configFromOptions } from './config-options.js';
import { checkClaims, fitsRequestHeaders, listOption } from './claims.js';
import { CHANNEL_PATTERN, MAX_CHANNELS_PER_CONNECTION, isChannelName } from '../channels/patterns.js';
import { MAX_HELD_FRAMES } from '../gateway/frame-limits.js';
import { patternFailure } from '../api/pattern-rules.js';
import { DEVICE_RULE, isDeviceName } from '../api/schemas.js';
import { onStopSignals } from './stop-signals.js';
import { watchSilence, type SilenceWatch } from './silence-watch.js';
import { hostUrl, routePath, serviceUrl } from './service-url.js';

const KEYS = ['host', 'port', 'dataDir', 'jwtSecret', 'jwtPublicKey', 'jwksUrl', 'jwtAudience', 'jwtIssuer'] as const;

interface ConnectOptions {
  url?: string;
  device: string;
  lastSeq?: string;
  epoch?: string;
  fromLatest?: boolean;
  ack: boolean;
  count?: string;
  tags?: string;
  sub?: string;
  token?: string;
  tokenFile?: string;
}

/**
 * `sub` frames sent before a `ping` whose `pong` says they were handled: the server
 * holds at most {@link MAX_HELD_FRAMES} frames ahead of their answers and closes a
 * connection past it (4003). Each `sub` is answered too (`subscribed` or `error`),
 * but one `pong` says a whole batch was handled (docs/protocol.md).
 */
const SUBS_PER_PING = MAX_HELD_FRAMES / 2;

/** Builds the `connect` subcommand. */
export function connectCommand(): Command {
  const cmd = new Command('connect')
    .description('connect as <uid> over WebSocket, print each frame as a JSON line, ack, and print last_seq and epoch on exit')
    .argument('<uid>', `the user to connect as (a token is minted with the configured key, unless --token is given): ${CLI_USER_ID_RULE}`)
    .option('--url <url>', 'service URL, http(s) or ws(s); a path is a prefix the routes are under (a proxy\'s, e.g. https://example.com/pixiu) (default http://PIXIU_HOST:PIXIU_PORT)')
    .addOption(new Option('--device <device>', 'device id').default('cli'))
    .option('--last-seq <n>', 'resume after this seq')
    .option('--epoch <epoch>', 'the epoch --last-seq belongs to (as printed on exit; null: none)')
    .option('--from-latest', 'skip history: only new messages')
    .option('--no-ack', 'do not ack (messages stay unacked and are redelivered)')
    .option('--count <n>', 'exit after this many msg frames')
    .option('--tags <list>', 'comma-separated tags for the minted token')
    .option('--sub <list>', 'comma-separated channels to follow once welcomed (the minted token allows exactly these); their subscribed and pub frames are printed too')
    .option('--token <jwt>', 'connect with this client JWT instead of minting one (tokens your identity provider mints, with PIXIU_JWT_PUBLIC_KEY or PIXIU_JWKS_URL); its sub must be <uid>, and it must allow the --sub channels; visible to other users in ps, so on a shared machine prefer --token-file')
    .option('--token-file <path>', 'as --token, the JWT read from this file (its first line; a leading "Bearer " is dropped)');
  addConfigOptions(cmd, KEYS, CLIENT_DOCS);
  cmd.action(async (uid: string) => {
    checkUserId(uid);
    // jose and ws are loaded by a run that uses them, not with the module: `--help` and
    // a refused option start without them (see main.ts).
    const { givenToken, readTokenFile } = await import('./connect-token.js');
    const opts = cmd.opts<ConnectOptions>();
    // Checked before connecting: `Number('abc')` is NaN, and a NaN count never ends the run.
    if (opts.count !== undefined && !/^[1-9]\d{0,8}$/.test(opts.count)) {
      throw new StartupError(`invalid --count ${JSON.stringify(opts.count)}: a whole number of msg frames, at least 1`);
    }
    // The server's rule (docs/api.md: decimal digits, no leading zero, at most 2^53 − 1),
    // checked here too so that a typo reads as one, not as the server's refusal of the
    // query (`connection refused: HTTP 400 …`).
    if (opts.lastSeq !== undefined && !(/^(?:0|[1-9]\d{0,15})$/.test(opts.lastSeq) && Number.isSafeInteger(Number(opts.lastSeq)))) {
      throw new StartupError(`invalid --last-seq ${JSON.stringify(opts.lastSeq)}: the seq to resume after, a whole number from 0 (as printed on exit)`);
    }
    // The server's rules for the query (docs/protocol.md), said in the flags' words.
    // The server refuses `epoch=` (400); read as none, it would resume under any epoch.
    if (opts.epoch === '') throw new StartupError('--epoch is empty: give the epoch printed on exit, or null for none');
    if (opts.epoch !== undefined && opts.lastSeq === undefined) {
      throw new StartupError('--epoch goes with --last-seq (the seq it belongs to, as printed on exit)');
    }
    if (opts.fromLatest && opts.lastSeq !== undefined) {
      throw new StartupError('--from-latest and --last-seq exclude each other: resume after a seq, or skip the history');
    }
    const config = configFromOptions(cmd, KEYS, CLIENT_DOCS);
    if (opts.token !== undefined && opts.tokenFile !== undefined) throw new StartupError('--token and --token-file exclude each other: give the token one way');
    const tokenFrom = opts.tokenFile !== undefined ? `--token-file ${opts.tokenFile}` : '--token';
    if (opts.tokenFile !== undefined) opts.token = await readTokenFile(opts.tokenFile);
    if (opts.token !== undefined && opts.tags !== undefined) {
      throw new StartupError('--tags shapes a minted token: with --token, the tags are the token\'s own');
    }
    // Said here, named by its flag, rather than by the service as `querystring/device`.
    if (!isDeviceName(opts.device)) throw new StartupError(`invalid --device ${JSON.stringify(opts.device)}: ${DEVICE_RULE}`);
    const tags = listOption(opts.tags, '--tags');
    const subs = listOption(opts.sub, '--sub');
    checkClaims(tags, []);
    // A pattern would be refused by the server's `sub` (it takes names): said here first.
    const badSub = subs.find((c) => !isChannelName(c));
    if (badSub !== undefined) throw new StartupError(`invalid --sub entry ${JSON.stringify(badSub)}: ${patternFailure(CHANNEL_PATTERN)}, at most 128 characters`);
    if (subs.length > MAX_CHANNELS_PER_CONNECTION) {
      throw new StartupError(`--sub names ${subs.length} channels: a connection follows at most ${MAX_CHANNELS_PER_CONNECTION}`);
    }
    let token: string;
    if (opts.token !== undefined) {
      token = givenToken(opts.token, uid, tokenFrom);
    } else {
      const { source } = await resolveJwtKey(config, { create: false });
      const { mintToken } = await import('../auth/mint-token.js');
      try {
        token = await mintToken(source, { user: uid, ttlSec: 24 * 3600, tags, audience: config.jwtAudience, issuer: config.jwtIssuer, ...(subs.length > 0 ? { channels: subs } : {}) });
      } catch (err) {
        const hint = source.kind === 'secret' ? '' : ', and pass one to pixiu connect with --token <jwt>';
        throw new StartupError(`${(err as Error).message}${hint}`, { cause: err });
      }
    }
    if (!fitsRequestHeaders(token)) {
      throw new StartupError(opts.token !== undefined
        ? `the token given with ${tokenFrom} is ${Buffer.byteLength(token)} bytes: more than a request's headers may carry (431)`
        : `the token for these --sub channels is ${Buffer.byteLength(token)} bytes: more than a request's headers may carry (431); follow fewer or shorter channels`);
    }
    const service = opts.url !== undefined ? serviceUrl(opts.url) : hostUrl(config.host, config.port);
    const base = new URL(service);
    base.protocol = service.protocol === 'https:' ? 'wss:' : 'ws:';
    base.pathname = routePath(service, '/v1/connect');
    base.searchParams.set('device', opts.device);
    if (opts.lastSeq !== undefined) base.searchParams.set('last_seq', opts.lastSeq);
    // `null` is what the exit line prints for an inbox that had no epoch yet: no epoch.
    if (opts.epoch !== undefined && opts.epoch !== 'null') base.searchParams.set('epoch', opts.epoch);
    if (opts.fromLatest) base.searchParams.set('from', 'latest');
    const count = opts.count === undefined ? Infinity : Number(opts.count);
    // A 401 names the key the token was minted with: the usual cause is another data dir's.
    const keyUsed = config.jwtSecret !== undefined ? 'PIXIU_JWT_SECRET (--jwt-secret)' : path.join(config.dataDir, 'secrets', 'jwt-secret');
    const refusedHint = opts.token !== undefined
      ? ` (the token given with ${tokenFrom}: is it one this service verifies, and not expired?)`
      : ` (the token was signed with the key from ${keyUsed}: does the service use that key? Give pixiu connect the service's --data-dir, or its PIXIU_JWT_SECRET)`;
    await run(base, service, token, { ack: opts.ack, count, subs, refusedHint });
  });
  return cmd;
}

/**
 * Connects and prints frames until the socket closes or the process is interrupted.
 * The exit code becomes 1 when the server ended the connection (any close but the
 * client's own 1000: replaced 4002, token expired 4001, shutdown 1001, …).
 * @param url the `/v1/connect` URL; `service` the HTTP URL it was made from
 * @param how `ack` each msg; exit after `count` msg frames; `subs`: channels to follow once welcomed
 */
async function run(url: URL, service: URL, token: string, how: { ack: boolean; count: number; subs: readonly string[]; refusedHint: string }): Promise<void> {
  const { ack, count } = how;
  // Required, not imported: ws is CommonJS, and import() reads it through its wrapper.mjs,
  // translating each of its modules for ESM: ~0.07 s of CPU more than require does.
  const WebSocket = createRequire(import.meta.url)('ws') as typeof import('ws').WebSocket;
  /** Channels still to follow, sent {@link SUBS_PER_PING} at a time. */
  const subs = how.subs.slice();
  /** Our own pings, oldest first, whose pongs are not printed: `pace` lets the next subs go. */
  const ownPings: Array<'pace' | 'alive'> = [];
  const sendPing = (why: 'pace' | 'alive'): void => {
    ws.send(JSON.stringify({ t: 'ping' }));
    ownPings.push(why);
  };
  const sendSubs = (): void => {
    for (const channel of subs.splice(0, SUBS_PER_PING)) ws.send(JSON.stringify({ t: 'sub', channel }));
    if (subs.length > 0) sendPing('pace');
  };
  /** Watches the open connection for silence (silence-watch.ts). */
  let silence: SilenceWatch | undefined;
  let lastSeq: number | undefined;
  let epoch: string | null | undefined;
  let received = 0;
  // Until the upgrade succeeds there is no connection to report on: a refusal or a
  // failure to connect is one error line, with no close and no exit line.
  let opened = false;
  /** Set by a signal: the close (or the failure to connect) is the user's doing. */
  let stopping = false;
  /** Aborted by a second signal: stop waiting for the close handshake and the epoch lookup. */
  const hurry = new AbortController();
  /**
   * Why this side dropped a connection it was closing, said after `closed 1006`: ws's
   * 1006 alone read as the server's doing (a walk4 nit; the silence watch says its own).
   */
  let droppedBecause: string | undefined;
  /** Drops the socket if the close begun now is not answered within {@link CLOSE_ANSWER_MS}. */
  const awaitCloseAnswer = (): void => {
    setTimeout(() => {
      droppedBecause = `the service did not answer the close within ${CLOSE_ANSWER_MS / 1000} s: gave up waiting`;
      ws.terminate();
    }, CLOSE_ANSWER_MS).unref();
  };
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, handshakeTimeout: HANDSHAKE_MS });
  /**
   * Standard output was closed by its reader (a `| head` that had enough: EPIPE): nothing
   * more is printed or acked, the connection is closed, and where it stopped goes to
   * stderr instead of the exit line. What was printed before reached the pipe, not
   * necessarily the reader, and was acked (README: use --no-ack with such readers).
   */
  let outputGone = false;
  const onOutputError = (err: NodeJS.ErrnoException): void => {
    if (outputGone) return;
    outputGone = true;
    process.stderr.write(`stdout closed (${err.code ?? err.message}): stopping; the last seq printed and acked was ${lastSeq ?? 'none'}\n`);
    process.exitCode = 1;
    ws.close(1000, 'output closed');
    awaitCloseAnswer();
  };
  process.stdout.on('error', onOutputError);
  // Installed for the whole run, exit line included: a repeat of the signal (a terminal's
  // Ctrl-C also passed on by npm, `timeout -s INT` signalling the command and then its
  // group) must not find Node's default action, which exits 130 with no exit line.
  const removeSignalHandlers = onStopSignals({
    stop: () => {
      stopping = true;
      silence?.stop();
      ws.close(1000, 'bye');
      // As the server does with a peer that does not answer (ws's own wait is 30 s).
      awaitCloseAnswer();
    },
    force: () => {
      hurry.abort();
      droppedBecause = 'stopped again: not waiting for the service to answer the close';
      ws.terminate();
    },
  });
  const finished = new Promise<void>((resolve, reject) => {
    ws.on('open', () => {
      opened = true;
      silence = watchSilence(ws, () => sendPing('alive'));
    });
    ws.on('unexpected-response', (req, res) => {
      // `ws` leaves a refused request to its listener: after a keep-alive answer the
      // socket stays open, and the process with it, unless it is destroyed (taken now:
      // once the answer has ended it is no longer the request's or the answer's).
      const socket = req.socket;
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => {
        socket?.destroy();
        reject(new StartupError(`connection refused: HTTP ${res.statusCode} ${refusalText(body, res.headers['content-type'], url.origin)}${res.statusCode === 401 ? how.refusedHint : ''}`));
      });
    });
    ws.on('error', (err) => reject(new StartupError(stopping && !opened
      ? 'interrupted before the connection was open'
      : `cannot connect to ${url.origin}: ${err.message}${(err as { code?: string }).code === 'ECONNREFUSED' ? ' (nothing listens there: is the service running, and on another port? --port / PIXIU_PORT, or --url)' : ''}`)));
    ws.on('message', (data) => {
      silence?.heard();
      // After --count msg frames the socket is closing: frames already on the way are
      // neither printed nor acked, so the printed last_seq is the last one acked.
      if (received >= count || outputGone) return;
      const text = data.toString();
      let frame: { t?: string; seq?: number; epoch?: string | null; to?: number; resume_from?: number; heartbeat?: number };
      try {
        frame = JSON.parse(text) as typeof frame;
      } catch {
        process.stdout.write(`${text}\n`);
        return;
      }
      // `heartbeat` is in seconds (docs/protocol.md, `welcome`).
      if (frame.t === 'welcome' && typeof frame.heartbeat === 'number' && frame.heartbeat > 0) silence?.setHeartbeat(frame.heartbeat * 1000);
      if (frame.t === 'pong' && ownPings.length > 0) {
        if (ownPings.shift() === 'pace') sendSubs();
        return;
      }
      // Counted when printed, for --count: frames of the same read beyond it are dropped.
      if (frame.t === 'msg') received += 1;
      // Acted on (acked, last_seq moved) once printed, in order: a frame whose line could
      // not be written (the reader went away: EPIPE) is neither acked nor counted as got.
      const got = frame;
      process.stdout.write(`${text}\n`, (err) => {
        if (err === null || err === undefined) onPrinted(got);
      });
    });
    /** What a frame printed does: epoch and last_seq follow it, and a msg or gap is acked. */
    let handled = 0;
    const onPrinted = (frame: { t?: string; seq?: number; epoch?: string | null; to?: number; resume_from?: number }): void => {
      // The first msg or gap after a null epoch names the epoch (docs/protocol.md, `msg`).
      if ((frame.t === 'msg' || frame.t === 'gap') && typeof frame.epoch === 'string') epoch = frame.epoch;
      if (frame.t === 'welcome') {
        epoch = frame.epoch;
        lastSeq = (frame.resume_from ?? 1) - 1;
        sendSubs();
      } else if (frame.t === 'reset') {
        epoch = frame.epoch;
        lastSeq = 0;
      } else if (frame.t === 'gap' && typeof frame.to === 'number') {
        // A redelivery round's gap or msg is of a seq sent before: last_seq never goes back.
        lastSeq = Math.max(lastSeq ?? 0, frame.to);
        if (ack) ws.send(ackFrame(frame.to, epoch));
      } else if (frame.t === 'msg' && typeof frame.seq === 'number') {
        lastSeq = Math.max(lastSeq ?? 0, frame.seq);
        handled += 1;
        if (ack) ws.send(ackFrame(frame.seq, epoch));
        if (handled >= count) ws.close(1000, 'done');
      }
    };
    ws.on('close', (code, reason) => {
      if (!opened) return;
      const why = code === 1006 && droppedBecause !== undefined ? ` (${droppedBecause})` : '';
      process.stderr.write(`closed ${code}${reason.length > 0 ? ` ${reason.toString()}` : ''}${why}\n`);
      if (code !== 1000) process.exitCode = 1;
      resolve();
    });
  });
  try {
    await finished;
  } finally {
    if (opened) {
      // Welcomed before the inbox existed (epoch null) and sent only gaps since (a msg
      // names the epoch), the socket never said the epoch; the history route does.
      if ((epoch ?? null) === null && (lastSeq ?? 0) > 0) {
        epoch = await inboxEpoch(service, token, lastSeq ?? 0, hurry.signal);
        if (epoch === null) {
          process.stderr.write('epoch unknown: the service could not be asked for it (GET /v1/me/messages); '
            + 'a resume with --epoch null cannot tell an inbox Redis lost from this one\n');
        }
      }
      if (!outputGone) process.stdout.write(`${JSON.stringify({ last_seq: lastSeq ?? null, epoch: epoch ?? null })}\n`);
    }
    removeSignalHandlers();
  }
}

/** How long the WebSocket handshake may take before `pixiu connect` gives up (a server that accepts and never answers), ms. */
const HANDSHAKE_MS = 10_000;

/** How long a close the client began waits for the server's answer before the socket is dropped (1006), ms. */
const CLOSE_ANSWER_MS = 5000;

/** How long the exit line waits for the epoch from the history route, ms. */
const EPOCH_LOOKUP_MS = 2000;

/**
 * The user's inbox epoch from `GET /v1/me/messages` (docs/api.md), or null when it
 * cannot be had within {@link EPOCH_LOOKUP_MS}.
 * @param service the service's HTTP URL (its origin serves the route, under its path)
 * @param hurry aborted when the user asks to stop at once (null then)
 */
async function inboxEpoch(service: URL, token: string, afterSeq: number, hurry: AbortSignal): Promise<string | null> {
  const url = new URL(routePath(service, '/v1/me/messages'), service);
  url.searchParams.set('after_seq', String(afterSeq));
  url.searchParams.set('limit', '1');
  try {
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.any([AbortSignal.timeout(EPOCH_LOOKUP_MS), hurry]) });
    if (!res.ok) return null;
    const body: unknown = await res.json();
    const epoch = typeof body === 'object' && body !== null && 'epoch' in body ? body.epoch : undefined;
    return typeof epoch === 'string' ? epoch : null;
  } catch {
    return null;
  }
}

/**
 * An `ack` frame, naming the epoch the seq counts in when the client knows it
 * (docs/protocol.md: an ack sent before a `reset` arrived then moves nothing).
 */
function ackFrame(seq: number, epoch: string | null | undefined): string {
  return JSON.stringify(epoch ? { t: 'ack', seq, epoch } : { t: 'ack', seq });
}

/**
 * What `pixiu connect` prints of a handshake's refusal body: Pixiu's JSON error body
 * as it came (docs/api.md, "Errors"), else not the body (another server's HTML page on
 * that port, a walkthrough tester's finding) but what it was and where to look.
 * @param body the answer's body as text
 * @param contentType its `Content-Type` header, if any
 * @param origin where the handshake went, for the hint
 */
export function refusalText(body: string, contentType: string | undefined, origin: string): string {
  if (/^application\/json\b/i.test(contentType ?? '') && body.trimStart().startsWith('{')) return body;
  const what = body.length === 0 ? 'an empty answer' : `${contentType ?? 'an answer'} of ${Buffer.byteLength(body)} bytes`;
  return `(${what}, not Pixiu's JSON error: is ${origin} the Pixiu service? --port / PIXIU_PORT, or --url with its path under a proxy)`;
}
