/**
 * Why a client JWT is refused 401 (docs/protocol.md, "Client tokens"): what `jose`
 * threw verifying it, in words that say what is wrong — its signature, its `alg` or
 * `kid` against the node's key, its header's `crit`, a claim — never the token and
 * nothing of the key but the setting it comes from. The refusals that mean "this
 * token is not for this node's key" (a bad signature, an `alg` the key does not take,
 * a `kid` the JWKS lacks) are logged at warn, thinned, for the operator of a node
 * given another key than the token issuer's: the client sees only its 401.
 */
// jose's modules one by one, not its index (jwt.ts says why).
import { decodeProtectedHeader } from 'jose/decode/protected_header';
import * as joseErrors from 'jose/errors';
import type { JWK } from 'jose';
import { PixiuError } from '../errors.js';
import type { Logger } from '../logger.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../log-throttle.js';
import { cutText, quotedText } from '../text-cut.js';
import type { ClientOf } from '../api/client-ip.js';

/**
 * How far `nbf` may be in the future, seconds: an identity provider whose clock is a
 * little ahead mints tokens that are "not yet valid" here for that long. `exp` gets no
 * such tolerance (jwt.ts toClaims): a connection is closed 4001 at its token's `exp`.
 * Here, where the refusal of a later `nbf` names it; jwt.ts verifies with it.
 */
export const NBF_TOLERANCE_SEC = 5;

/**
 * The refusal of a token whose signature does not verify with the node's key: most
 * often one minted with another key (another data dir's jwt-secret). Names the
 * settings, never the key.
 */
export const BAD_SIGNATURE = "invalid token: its signature does not verify with this node's key (PIXIU_JWT_SECRET, PIXIU_JWT_PUBLIC_KEY or PIXIU_JWKS_URL; a token signed with another key, another data dir's jwt-secret say)";

/**
 * The 401 of a token whose `exp` is not after this node's clock, with how far behind
 * and what to do, as every other refusal of a token says (a newcomer's finding: bare
 * "token expired" was the one without a hint). The close of an open connection at its
 * `exp` keeps the reason `token expired` (4001, docs/protocol.md "Close codes").
 * This is the WebSocket paths' wording (connect, `refresh`); the HTTP client routes
 * answer {@link tokenExpiredOverHttp} ({@link TokenExpiredError.overHttp}).
 * @param exp the token's `exp`, seconds since the epoch (finite: checked before)
 * @param nowMs this node's clock, ms since the epoch
 */
export function tokenExpired(exp: number, nowMs = Date.now()): string {
  return `${expiredBehind(exp, nowMs)}; mint a new token `
    + '(on an open WebSocket, send it in a "refresh" frame before the current one\'s "exp", or the connection is closed 4001: docs/protocol.md "Client tokens")';
}

/**
 * The same 401 on the HTTP client routes (`GET /v1/me/messages`, `POST /v1/me/ack`):
 * no WebSocket there, so no word of `refresh` frames or 4001 (a mobile tester's F5).
 * @param exp the token's `exp`, seconds since the epoch (finite: checked before)
 * @param nowMs this node's clock, ms since the epoch
 */
export function tokenExpiredOverHttp(exp: number, nowMs = Date.now()): string {
  return `${expiredBehind(exp, nowMs)}; mint a new token and send the request again with it (docs/protocol.md "Client tokens")`;
}

/** The words both expiry refusals open with: how far `exp` (s) is behind `nowMs` (ms), in whole seconds. */
function expiredBehind(exp: number, nowMs: number): string {
  const behind = Math.max(0, Math.floor(nowMs / 1000 - exp));
  return `token expired: its "exp" is ${behind} s behind this node's clock`;
}

/**
 * The refusal of an expired client token (401 UNAUTHORIZED, {@link tokenExpired}'s
 * words), keeping the `exp` and the time it was refused at, so that a route without
 * a WebSocket can answer in its own words ({@link overHttp}).
 */
export class TokenExpiredError extends PixiuError {
  /** The token's `exp`, seconds since the epoch. */
  readonly exp: number;
  /** This node's clock when the token was refused, ms since the epoch. */
  readonly atMs: number;

  /**
   * @param exp the token's `exp`, seconds since the epoch (finite)
   * @param atMs this node's clock, ms since the epoch
   * @param options.cause jose's error, when it was jose that refused it
   */
  constructor(exp: number, atMs = Date.now(), options?: { cause?: unknown }) {
    super('UNAUTHORIZED', tokenExpired(exp, atMs), options);
    this.exp = exp;
    this.atMs = atMs;
  }

  /** The same refusal in the HTTP client routes' words ({@link tokenExpiredOverHttp}), the same cause. */
  overHttp(): PixiuError {
    return new PixiuError('UNAUTHORIZED', tokenExpiredOverHttp(this.exp, this.atMs), { cause: this.cause });
  }
}

/**
 * The warning of a client token refused for its signature: the client is told only
 * 401, no hint of the key; the operator of a node given another key than the token
 * issuer's sees this. Fields: the token header's `alg` and `kid` (quoted by the client,
 * no key material), the request's `reqId` and the client's `ip`, `notLogged`. At most one line per
 * {@link OUTAGE_LOG_INTERVAL_MS}.
 */
export const BAD_SIGNATURE_LOG = "client token refused 401: its signature does not verify with this node's key (PIXIU_JWT_SECRET, PIXIU_JWT_PUBLIC_KEY or PIXIU_JWKS_URL; docs/protocol.md, \"Client tokens\")";

/**
 * The warning of a client token refused because the node's key cannot verify it at
 * all: its `alg` is not one the key takes ({@link algNotTaken}), or its `kid` names no
 * key of the JWKS that takes its `alg` (a key rotated out, a token of another issuer,
 * a key left out of the set as unable to verify: {@link kidCannotVerify}).
 * Fields: `reason` (the 401's message), the header's `alg` and `kid` (cut, as for
 * {@link BAD_SIGNATURE_LOG}), the request's `reqId` and the client's `ip`, `notLogged`. At most one line per
 * {@link OUTAGE_LOG_INTERVAL_MS}, apart from the bad signatures' lines.
 */
export const KEY_REFUSED_LOG = "client token refused 401: this node's key cannot verify it (PIXIU_JWT_SECRET, PIXIU_JWT_PUBLIC_KEY or PIXIU_JWKS_URL; docs/protocol.md, \"Client tokens\")";

/** Most characters of a header's `alg`, `kid` or `crit` entry that a refusal or a warning repeats. */
const MAX_HEADER_FIELD_SHOWN = 64;

/** What the refusals say of the node's key source, never the key. */
export interface KeyDescription {
  /** Where the key comes from, as a refusal names it: `PIXIU_JWT_PUBLIC_KEY`, say. */
  readonly setting: string;
  /** The JWS algorithms the key takes (what jose is given), in the order a refusal lists them. */
  readonly algorithms: readonly string[];
  /**
   * A JWKS's only: the keys of the set jose holds now (the usable ones,
   * src/auth/jwks-fetch.ts), undefined before one was fetched; read to tell a `kid`
   * the set lacks from one whose key does not take the token's `alg`.
   */
  readonly keySet?: () => readonly JWK[] | undefined;
  /**
   * A JWKS's only: why the key of `kid` that the set last fetched holds, and that was
   * left out of it, cannot verify tokens (src/auth/jwks-keys.ts); undefined when no
   * key of that `kid` was left out.
   */
  readonly leftOut?: (kid: string) => string | undefined;
}

/** The JWS header parameters a refusal reads, as the token has them (any JSON value). */
export interface Header {
  readonly alg?: unknown;
  readonly kid?: unknown;
  readonly crit?: unknown;
  readonly b64?: unknown;
}

/** `value` of a token header, quoted, escaped and cut for a refusal (text-cut.ts). */
function shown(value: unknown): string {
  return quotedText(value, MAX_HEADER_FIELD_SHOWN);
}

/** The key's algorithms and where it comes from, as a refusal names them: `HS256: PIXIU_JWT_SECRET …`. */
function takes(key: KeyDescription): string {
  return `${key.algorithms.join(', ')}: ${key.setting}`;
}

/**
 * The refusal of a token whose `alg` the node's key does not take: RS256 to a node
 * with a secret (HS256 only), HS256 to one with a public key (an HMAC keyed with the
 * public key's text is no signature by its private key), `none` anywhere, ES384 to a
 * P-256 key (src/auth/pem-key.ts).
 */
export function algNotTaken(alg: unknown, key: KeyDescription): string {
  return `invalid token: its alg ${shown(alg)} is not one this node's key takes (${takes(key)})`;
}

/** The refusal of a token whose header has no `alg` (RFC 7515 §4.1.1: it must). */
export function noAlg(key: KeyDescription): string {
  return `invalid token: its header has no alg (RFC 7515 §4.1.1; this node's key takes ${takes(key)})`;
}

/**
 * The refusal of a token whose `kid` names no key of the JWKS: a key the identity
 * provider rotated out, a token of another issuer, or a key published since the set
 * was last read. A `kid` the set lacks has it read again unless it was read less than
 * a second ago (JWKS_COOLDOWN_MS, jose's `cooldownDuration`), so a token naming a key
 * published just now verifies when sent again a second later at most.
 */
export function kidNotInJwks(kid: unknown, setting: string): string {
  return `invalid token: its kid ${shown(kid)} is not in the JWKS at ${setting} (a key rotated out, or a token from another issuer; a key published just now is found within a second: the set is read again at most once a second)`;
}

/**
 * The refusal of a token whose `kid` names a key the JWKS holds but that cannot
 * verify tokens, left out when the set was read (src/auth/jwks-keys.ts: an RSA key
 * under 2048 bits, a curve jose lacks, a secret, `use: enc` …): the key set's fault,
 * not the token's.
 * @param why the reason jwks-keys.ts gives, e.g. `RSA of 1024 bits, under 2048`
 */
export function kidCannotVerify(kid: string, why: string, setting: string): string {
  return `invalid token: the JWKS key with kid ${shown(kid)} cannot verify tokens (${why}); the key set at ${setting} needs fixing`;
}

/** The refusal of a token whose `kid` names a key of the JWKS of another type or algorithm than its `alg`. */
export function kidOfOtherAlg(kid: unknown, alg: unknown, setting: string): string {
  return `invalid token: its kid ${shown(kid)} names a key of the JWKS at ${setting} that does not take its alg ${shown(alg)}`;
}

/** The refusal of a token that names no `kid`, of an `alg` no key of the JWKS takes. */
export function noKeyForAlg(alg: unknown, setting: string): string {
  return `invalid token: it names no kid, and no key of the JWKS at ${setting} takes its alg ${shown(alg)}`;
}

/**
 * The refusal of a token that names no `kid` while the JWKS holds several keys of its
 * `alg`: which one signed it is the `kid`'s to say (jose tries none of them).
 */
export function severalKeysForAlg(alg: unknown, setting: string): string {
  return `invalid token: it names no kid, and the JWKS at ${setting} holds several keys that take its alg ${shown(alg)}; the token must name its key with kid`;
}

/**
 * The refusal of a token whose header's `crit` (RFC 7515 §4.1.11) is not one jose
 * takes: not an array of extension names, an extension other than `b64` (RFC 7797, the
 * only one jose knows: a recipient must refuse what it does not understand), or `b64`
 * listed without a `b64` of true or false.
 * @returns undefined when `crit` is absent or one jose takes
 */
export function critRefused(header: Header): string | undefined {
  const { crit } = header;
  if (crit === undefined) return undefined;
  if (!Array.isArray(crit) || crit.length === 0 || crit.some((name) => typeof name !== 'string' || name === '')) {
    return 'invalid token: its header\'s crit is not a list of extension names (RFC 7515 §4.1.11)';
  }
  const unknown = crit.find((name) => name !== 'b64');
  if (unknown !== undefined) return `invalid token: its header's crit lists ${shown(unknown)}, an extension this node does not know (only "b64", RFC 7797)`;
  return typeof header.b64 === 'boolean' ? undefined : 'invalid token: its header\'s crit lists "b64" but its b64 is not true or false (RFC 7797 §3)';
}

/** The refusal of a JWT whose header's `b64` is false: an unencoded payload, which a JWT must not have (RFC 7797 §7). */
export const UNENCODED_PAYLOAD = 'invalid token: its header\'s b64 is false (an unencoded payload), which a JWT must not have (RFC 7797 §7)';

/** The token's header, `{}` when it cannot be read (checkJwtForm answers for such a token first: a header that is no JSON object). */
export function headerOf(token: string): Header {
  try {
    return decodeProtectedHeader(token) as Header;
  } catch {
    return {};
  }
}

/**
 * The `alg` and `kid` of a token's header, for the warnings: strings cut to
 * {@link MAX_HEADER_FIELD_SHOWN} characters by cutText (never inside a pair, `…` when
 * cut), absent when not strings.
 */
function headerFields(header: Header): { alg?: string; kid?: string } {
  const fields: { alg?: string; kid?: string } = {};
  for (const name of ['alg', 'kid'] as const) {
    const value = header[name];
    if (typeof value === 'string') fields[name] = cutText(value, MAX_HEADER_FIELD_SHOWN);
  }
  return fields;
}

/**
 * The refusals of one verifier: maps what jose threw to the 401 a client reads, and
 * logs those of a token not for the node's key, thinned.
 */
export class TokenRefusals {
  readonly #key: KeyDescription;
  readonly #logger: Logger | undefined;
  readonly #badSignatures = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);
  readonly #keyRefusals = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);

  /**
   * @param key what the refusals name of the key source
   * @param logger where {@link BAD_SIGNATURE_LOG} and {@link KEY_REFUSED_LOG} go; none when absent
   */
  constructor(key: KeyDescription, logger?: Logger) {
    this.#key = key;
    this.#logger = logger;
  }

  /**
   * The 401 for what jose threw verifying `token` (an outage of the JWKS is the
   * caller's to tell apart first: 503, not 401). In jose's order of checks: `crit`,
   * `alg`, the key (`kid`), the signature, `b64`, the claims.
   * @returns PixiuError UNAUTHORIZED, jose's error as its cause: {@link TokenExpiredError}; a
   *   claim jose refused, named; {@link BAD_SIGNATURE}; a `crit`
   *   or `b64` refused ({@link critRefused}, {@link UNENCODED_PAYLOAD}); {@link noAlg},
   *   {@link algNotTaken}; for a JWKS {@link kidNotInJwks}, {@link kidOfOtherAlg},
   *   {@link noKeyForAlg}, {@link severalKeysForAlg} or {@link kidCannotVerify}; else a
   *   bare `invalid token` (none seen: a JWKS key jose refuses to use, an RSA key under
   *   2048 bits say, is left out when the set is read, src/auth/jwks-keys.ts)
   * @param client reads the request's `reqId` and the client's address (src/api/client-ip.ts),
   *   the warnings' fields: called only for a warning written, not for a refusal thinned out
   *   or one not logged; none when absent (a `refresh` frame's token: no request at hand)
   */
  of(err: unknown, token: string, client?: ClientOf): PixiuError {
    const refused = (message: string): PixiuError => new PixiuError('UNAUTHORIZED', message, { cause: err });
    if (err instanceof joseErrors.JWTExpired) return new TokenExpiredError(Number(err.payload.exp), Date.now(), { cause: err });
    // Claims are checked once the signature holds: naming the claim tells the key's
    // holder what to fix and nobody else anything (jose's message, e.g. 'missing
    // required "exp" claim').
    // A future `nbf` in plain words (jose's own: '"nbf" claim timestamp check failed', a walk3 nit).
    if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'nbf' && err.reason === 'check_failed') {
      return refused(`token not valid yet: its "nbf" (not before) is more than ${NBF_TOLERANCE_SEC} s ahead of this node's clock (docs/protocol.md "Client tokens")`);
    }
    if (err instanceof joseErrors.JWTClaimValidationFailed) return refused(`invalid token: ${err.message}`);
    const header = headerOf(token);
    if (err instanceof joseErrors.JWSSignatureVerificationFailed) {
      this.#log(this.#badSignatures, headerFields(header), BAD_SIGNATURE_LOG, client);
      return refused(BAD_SIGNATURE);
    }
    // jose checks `crit` first (an unknown extension is JOSENotSupported, a malformed
    // one JWSInvalid), `b64` false only once the signature holds (JWTInvalid).
    const crit = err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JOSENotSupported ? critRefused(header) : undefined;
    if (crit !== undefined) return refused(crit);
    if (err instanceof joseErrors.JWTInvalid && header.b64 === false) return refused(UNENCODED_PAYLOAD);
    // jose's JWSInvalid for an `alg` that is missing, not a string or empty; the two
    // last are answered as any `alg` the key does not take.
    if (err instanceof joseErrors.JWSInvalid && header.alg === undefined) return refused(noAlg(this.#key));
    const reason = this.#keyReason(err, header);
    if (reason === undefined) return refused('invalid token');
    this.#log(this.#keyRefusals, { reason, ...headerFields(header) }, KEY_REFUSED_LOG, client);
    return refused(reason);
  }

  /** Why the node's key cannot verify a token of `header`, when that is what `err` says. */
  #keyReason(err: unknown, { alg, kid }: Header): string | undefined {
    const { setting } = this.#key;
    if (err instanceof joseErrors.JOSEAlgNotAllowed || (err instanceof joseErrors.JWSInvalid && (typeof alg !== 'string' || alg === ''))) return algNotTaken(alg, this.#key);
    if (err instanceof joseErrors.JWKSMultipleMatchingKeys) return severalKeysForAlg(alg, setting);
    if (!(err instanceof joseErrors.JWKSNoMatchingKey)) return undefined;
    if (kid === undefined) return noKeyForAlg(alg, setting);
    // jose matches a key by `kid` and then by its type, curve and `alg` (the `kid`
    // alone does not choose it): a `kid` of the set whose key takes another `alg`.
    const named = typeof kid === 'string' && this.#key.keySet?.()?.some((jwk) => jwk.kid === kid) === true;
    if (named) return kidOfOtherAlg(kid, alg, setting);
    // A key of the set left out for it cannot verify: the set's fault, said so.
    const why = typeof kid === 'string' ? this.#key.leftOut?.(kid) : undefined;
    return why === undefined ? kidNotInJwks(kid, setting) : kidCannotVerify(kid as string, why, setting);
  }

  /** Logs `msg` at warn with `fields` and the request's `reqId` and `ip`, read only then, when `throttle` lets it (never the token). */
  #log(throttle: LogThrottle, fields: Record<string, unknown>, msg: string, client: ClientOf | undefined): void {
    if (this.#logger === undefined) return;
    const left = throttle.take();
    if (left !== undefined) this.#logger.warn({ ...fields, ...client?.(), ...thinnedFields(left) }, msg);
  }
}
