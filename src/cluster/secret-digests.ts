/**
 * The secrets every node sharing a Redis must agree on (DESIGN.md §7, §9), compared
 * without putting them in Redis: `PIXIU_API_TOKEN` (producers get 401 from a node with
 * another) and the client-token key (`PIXIU_JWT_SECRET`, `PIXIU_JWT_PUBLIC_KEY` or
 * `PIXIU_JWKS_URL`: clients get 401 from a node that cannot verify their token). A
 * node started without them generates its own and joined silently: the producers'
 * requests sent to it were refused 401, and nothing was logged (a black-box SRE's
 * finding). Each node puts a one-way digest of each in its shared-settings entry
 * (src/cluster/shared-settings.ts), and a starting node warns, at error, of every live
 * node whose secret differs; a running node, of every node that joins after it with
 * another (src/cluster/joiner-secrets.ts).
 *
 * The digest of a secret is scrypt(secret, salt ‖ {@link DIGEST_LABEL}, 8 bytes) with
 * N = 2^14, r = 8, p = 1 (RFC 7914; 16 MiB of memory), in hex, where the salt is 16
 * random bytes each node draws at its start and publishes beside its digests: there is
 * no salt shared by every install (or every node) to lose, so no one dictionary of
 * weak tokens works against every deployment's Redis, its backups and replicas (a
 * reviewer's finding: the first scheme was HMAC-SHA-256 keyed by the secret over a
 * fixed label). One digest costs about 30 ms of one core (27 ms median of 15 on the
 * 2-core development machine, up to 90 ms when it was busy), and each guess at a
 * token costs a reader of Redis as much, per node entry. It tells equal secrets from
 * different ones and nothing else: a token of little entropy can still be found by
 * trying, slowly; one of 32 random bytes (what Pixiu generates, and
 * `openssl rand -base64 32` gives) cannot. To compare, a starting node computes its
 * own secret's digest under EACH live node's salt (one scrypt per live node and
 * secret: nodes are few, a handful of them cost well under a second), one after the
 * other with the async scrypt (libuv's thread pool: the event loop is not held, and
 * the pool, which the LevelDB store's reads and writes use too, lends one thread at a
 * time) — the same comparisons again when a running node writes its entry back after
 * Redis lost it (each salt and secret is digested once a process: {@link secretDigest}),
 * and for each node that joins later (a few per registry renewal, joiner-secrets.ts).
 * Its own digests, at start, are async scrypt too.
 *
 * What a reader of Redis (or of its backups and replicas) gets besides these digests:
 * message ids and inbox positions (seqs, device cursors), presence, the cluster secret,
 * and the content of the broadcasts and channel publications still in their capped
 * streams (DESIGN.md §8) — not the content of direct and room messages, which is in
 * each node's on-disk store (DESIGN.md §3). So the API token and client-token key are
 * worth guarding there: with them, one could read any inbox and send as anyone.
 *
 * A public key is no secret: its digest is SHA-256 of its SPKI DER (no salt), so two
 * PEM texts of one key compare equal. A JWKS URL is not compared: the keys are fetched
 * from it, and nodes may reach one key set at different URLs (an internal and an
 * external name); only the kind of key source is.
 *
 * An entry of the first scheme — no salt: releases before 3545053, 2e0830c among them —
 * holds HMAC-SHA-256 keyed by the secret over {@link LEGACY_DIGEST_LABEL}, first 64
 * bits in hex (a public key's digest as now). A node of this release reads such an entry
 * and compares its own secrets' digests in that scheme, computed here and never
 * published: that node is of an older release, whose start logged at error that the
 * secrets differ from every salted entry, equal or not (it cannot read them), and whose
 * really different token went unsaid beside a newer node (an upgrade tester's finding).
 * An entry of a release from before the digests (no `secrets`) is not compared:
 * shared-settings.ts says so at info.
 */
import { createHash, createHmac, randomBytes, scrypt } from 'node:crypto';
import path from 'node:path';
import { LRUCache } from 'lru-cache';
import type { Secrets } from '../auth/secrets.js';
import { readPublicKey } from '../auth/pem-key.js';
import type { Config } from '../config/config.js';

/** The label each secret's scrypt salt ends with; versioned, so a new scheme never compares equal to an old one. */
export const DIGEST_LABEL = 'pixiu node-settings secret digest v2';

/** The label the first scheme's HMAC keys each secret over (src/cluster/secret-digests.ts in 2e0830c); only read, never written. */
export const LEGACY_DIGEST_LABEL = 'pixiu node-settings secret digest v1';

/** scrypt's cost (RFC 7914): N = 2^14, r = 8, p = 1, 16 MiB; `maxmem` leaves room above 128·N·r bytes. */
const SCRYPT_COST = { N: 2 ** 14, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;

/** Bytes of a digest (8: 16 hex digits) and of a node's salt (16: 32 hex digits). */
const DIGEST_BYTES = 8;
const SALT_BYTES = 16;

/** How a node's client tokens are verified, as its entry publishes it. */
type JwtKind = 'secret' | 'public-key' | 'jwks';

/** A node's secrets, as published in its shared-settings entry. */
export interface SecretDigests {
  /** The node's salt: 16 random bytes drawn at its start, 32 hex digits. */
  readonly salt: string;
  /** Digest of the API token under `salt` (16 hex digits). */
  readonly apiToken: string;
  /** The kind of client-token key source. */
  readonly jwtKind: JwtKind;
  /**
   * Digest of the key (16 hex digits): of an HS256 secret under `salt`; of a public
   * key, SHA-256 of its SPKI DER (unsalted); undefined for a JWKS URL (not compared).
   */
  readonly jwtKey?: string;
}

/** The secrets a node runs with, that its digests are of. */
export type OwnSecrets = Pick<Secrets, 'apiToken' | 'jwt'>;

/**
 * A node's secrets as an entry of the first scheme publishes them (no salt: a release
 * before 3545053): HMAC digests under {@link LEGACY_DIGEST_LABEL}, a public key's as now.
 */
export interface LegacyDigests extends Omit<SecretDigests, 'salt'> {
  readonly salt?: undefined;
}

/** Another node's published digests, in either scheme. */
export type PeerDigests = SecretDigests | LegacyDigests;

/** This node's published digests, and how to compare its secrets with another node's. */
export interface SecretCheck {
  readonly digests: SecretDigests;
  /** The secrets of `theirs` that differ from this node's ({@link differingSecrets}); rejects only when scrypt fails (no memory). */
  differing(theirs: PeerDigests): Promise<SecretName[]>;
}

/** This node's secrets: their digests, and which came from the data dir because no setting gave them. */
export interface NodeSecrets extends SecretCheck {
  /** `api-token`, `jwt-secret`: the data dir's generated file is used, no setting was given. */
  readonly fromDataDir: readonly string[];
  /** Which of those this start generated (`Secrets.generated`). */
  readonly generated: readonly string[];
  /** The data dir's secrets folder. */
  readonly dir: string;
}

/**
 * The digests this process computed (or is computing), by salt and a SHA-256 of the
 * secret (the cache holds no secret): a node digests its secrets under another node's
 * salt again each time it compares with that node — when it writes its entry back after
 * Redis lost it, when that node's entry is read again — and nodes started in one
 * process (the cluster tests start several in a file) digest one secret under one
 * salt once each. scrypt gives the same answer every time, at ~30 ms of CPU and 16 MiB
 * of fresh memory (its page faults cost as much again in system time) a run. 256
 * entries: a few per node this one has compared with.
 */
const digestCache = new LRUCache<string, Promise<string>>({ max: 256 });

/**
 * scrypt of `secret` with salt `salt` (hex) followed by {@link DIGEST_LABEL}, 8 bytes
 * in hex (16 digits); about 30 ms of a thread-pool thread (see the module comment),
 * once per salt and secret in a process: a digest asked for again, or while it is
 * computed, is the same promise (a failed one is not kept).
 * @param salt 32 hex digits
 */
export function secretDigest(secret: string, salt: string): Promise<string> {
  const key = `${salt}:${createHash('sha256').update(secret).digest('hex')}`;
  const known = digestCache.get(key);
  if (known !== undefined) return known;
  const saltBytes = Buffer.concat([Buffer.from(salt, 'hex'), Buffer.from(DIGEST_LABEL)]);
  const digest = new Promise<string>((resolve, reject) => {
    scrypt(secret, saltBytes, DIGEST_BYTES, SCRYPT_COST, (err, key) => (err ? reject(err) : resolve(key.toString('hex'))));
  });
  digestCache.set(key, digest);
  digest.catch(() => {
    if (digestCache.get(key) === digest) digestCache.delete(key);
  });
  return digest;
}

/**
 * The first scheme's digest of `secret`: HMAC-SHA-256 keyed by it over
 * {@link LEGACY_DIGEST_LABEL}, first 64 bits in hex — as 2e0830c computed it, to compare
 * with an entry of such a release; never published.
 */
export function legacyDigest(secret: string): string {
  return createHmac('sha256', secret).update(LEGACY_DIGEST_LABEL).digest('hex').slice(0, 2 * DIGEST_BYTES);
}

/** SHA-256 of a public key's SPKI DER, first 64 bits in hex: one key in any PEM text gives one digest. */
function publicKeyDigest(pem: string): string {
  return createHash('sha256').update(readPublicKey(pem).key.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 2 * DIGEST_BYTES);
}

/** The digest of `secret` as `theirs` holds theirs: under their salt, or the first scheme's when they have none. */
async function digestAs(secret: string, theirs: PeerDigests): Promise<string> {
  return theirs.salt === undefined ? legacyDigest(secret) : secretDigest(secret, theirs.salt);
}

/** The digest of the client-token key: an HS256 secret's by `digest`, a public key's SPKI digest; undefined for a JWKS URL. */
async function jwtKeyDigest(jwt: OwnSecrets['jwt'], digest: (secret: string) => Promise<string>): Promise<string | undefined> {
  return jwt.kind === 'secret' ? digest(jwt.secret) : jwt.kind === 'public-key' ? publicKeyDigest(jwt.pem) : undefined;
}

/**
 * The digests of a node's secrets (never the secrets) under `salt`, a fresh random one
 * by default: two scrypts at most (async, see the module comment).
 * @param salt 32 hex digits
 */
export async function secretDigests(secrets: OwnSecrets, salt = randomBytes(SALT_BYTES).toString('hex')): Promise<SecretDigests> {
  const [apiToken, jwtKey] = await Promise.all([secretDigest(secrets.apiToken, salt), jwtKeyDigest(secrets.jwt, (key) => secretDigest(key, salt))]);
  return { salt, apiToken, jwtKind: secrets.jwt.kind, ...(jwtKey === undefined ? {} : { jwtKey }) };
}

/**
 * The secrets of another node (its published `theirs`) that differ from `mine`: each
 * of mine is digested under their salt and compared with their digest (one scrypt per
 * salted secret, one after the other), or in the first scheme (an HMAC) when their
 * entry has no salt; a public key by its SPKI digest, a JWKS URL by the kind of key
 * source only.
 */
export async function differingSecrets(mine: OwnSecrets, theirs: PeerDigests): Promise<SecretName[]> {
  const out: SecretName[] = [];
  if (await digestAs(mine.apiToken, theirs) !== theirs.apiToken) out.push('PIXIU_API_TOKEN');
  if (mine.jwt.kind !== theirs.jwtKind || (mine.jwt.kind !== 'jwks' && await jwtKeyDigest(mine.jwt, (key) => digestAs(key, theirs)) !== theirs.jwtKey)) {
    out.push('client-token key');
  }
  return out;
}

/** {@link NodeSecrets} of the secrets this node runs with, under a fresh salt (async scrypt, at start). */
export async function nodeSecrets(secrets: Secrets, config: Config): Promise<NodeSecrets> {
  const fromDataDir = [
    ...(config.apiToken === undefined ? ['api-token'] : []),
    ...(config.jwtSecret === undefined && config.jwtPublicKey === undefined && config.jwksUrl === undefined ? ['jwt-secret'] : []),
  ];
  const own: OwnSecrets = { apiToken: secrets.apiToken, jwt: secrets.jwt };
  return {
    digests: await secretDigests(own), differing: (theirs) => differingSecrets(own, theirs),
    fromDataDir, generated: secrets.generated, dir: secrets.dir,
  };
}

const HEX16 = /^[0-9a-f]{16}$/;
const HEX32 = /^[0-9a-f]{32}$/;

/**
 * Another node's published digests, if its entry has them in this scheme: an older
 * release's has none, the first scheme's (HMAC over a fixed label) no salt
 * ({@link readLegacyDigests}); a malformed one is not compared either (nor digested
 * under: no scrypt of a salt of any length).
 */
export function readDigests(parsed: Record<string, unknown>): SecretDigests | undefined {
  const s = parsed.secrets as Partial<SecretDigests> | undefined;
  if (typeof s !== 'object' || s === null) return undefined;
  if (typeof s.salt !== 'string' || !HEX32.test(s.salt)) return undefined;
  const rest = digestFields(s);
  return rest === undefined ? undefined : { salt: s.salt, ...rest };
}

/**
 * Another node's digests in the first scheme, if its entry has them so: `secrets`
 * without a salt, as releases before 3545053 wrote it (2e0830c:
 * `{"apiToken": "<16 hex>", "jwtKind": "secret", "jwtKey": "<16 hex>"}`). Undefined for
 * an entry without `secrets` (a release before the digests), one with a salt (read by
 * {@link readDigests}) or a malformed one.
 */
export function readLegacyDigests(parsed: Record<string, unknown>): LegacyDigests | undefined {
  const s = parsed.secrets as Partial<SecretDigests> | undefined;
  if (typeof s !== 'object' || s === null || 'salt' in s) return undefined;
  return digestFields(s);
}

/**
 * Another node's published digests in either scheme ({@link readDigests}, else
 * {@link readLegacyDigests}); undefined when its entry has none to compare (a release
 * from before them) or malformed ones.
 */
export function peerDigests(parsed: Record<string, unknown>): PeerDigests | undefined {
  return readDigests(parsed) ?? readLegacyDigests(parsed);
}

/** The digests of a `secrets` object, salt aside, if well formed: `apiToken` and a `jwtKey` of 16 hex digits, a known `jwtKind`. */
function digestFields(s: Partial<SecretDigests>): Omit<SecretDigests, 'salt'> | undefined {
  if (typeof s.apiToken !== 'string' || !HEX16.test(s.apiToken)) return undefined;
  if (s.jwtKind !== 'secret' && s.jwtKind !== 'public-key' && s.jwtKind !== 'jwks') return undefined;
  return { apiToken: s.apiToken, jwtKind: s.jwtKind, ...(typeof s.jwtKey === 'string' ? { jwtKey: s.jwtKey } : {}) };
}

/** Which secret differs: the API token, or the client-token key. */
export type SecretName = 'PIXIU_API_TOKEN' | 'client-token key';

/** The setting a key source comes from. */
const KIND_SETTING: Readonly<Record<JwtKind, string>> = {
  secret: 'PIXIU_JWT_SECRET', 'public-key': 'PIXIU_JWT_PUBLIC_KEY', jwks: 'PIXIU_JWKS_URL',
};

/**
 * The error line of a secret that differs between this node and `nodes` (which have
 * `theirs`): which secret, who gets 401, where this node's came from when no setting
 * gave it, that a rolling rotation shows it until the last node has the new one, and
 * what to do. Never a secret or a digest. Each node is named by its id and, when `urls`
 * has it (its store lease), the URL it advertises: an id alone (host-pid-random) left
 * the reader to find which node it was (an ops finding).
 */
export function secretMismatchLine(
  which: SecretName, here: NodeSecrets, theirs: Pick<PeerDigests, 'jwtKind'>, nodes: readonly string[], urls: ReadonlyMap<string, string> = new Map(),
): string {
  const on = namedNodes(nodes, urls);
  const api = which === 'PIXIU_API_TOKEN';
  const file = api ? 'api-token' : 'jwt-secret';
  const own = here.fromDataDir.includes(file)
    ? ` This node ${here.generated.includes(file) ? 'generated its own now' : 'uses the one generated in its data dir'} (${path.join(here.dir, file)}) because ${api ? 'PIXIU_API_TOKEN is not set' : 'none of PIXIU_JWT_SECRET, PIXIU_JWT_PUBLIC_KEY and PIXIU_JWKS_URL is set'}.`
    : '';
  const kinds = !api && here.digests.jwtKind !== theirs.jwtKind
    ? ` (${KIND_SETTING[here.digests.jwtKind]} here, ${KIND_SETTING[theirs.jwtKind]} there)` : '';
  const who = api
    ? 'producers and admin callers get 401 from the nodes whose PIXIU_API_TOKEN is not the one they send'
    : 'clients get 401 (their token refused) from the nodes whose key did not sign it';
  const setting = api ? 'PIXIU_API_TOKEN' : `client-token key (${KIND_SETTING[here.digests.jwtKind]})`;
  return `the ${api ? 'API token (PIXIU_API_TOKEN)' : 'client-token key'} differs between this node and ${on}${kinds}: ${who}.${own} `
    + `Give every node the same ${setting}; during a rolling change of it this is expected until the last node has the new one (docs/decisions.md, "Several nodes")`;
}

/** `node <id> (<url>)`, or `nodes <id> (<url>), <id>`: each by id and, when `urls` has it, the URL it advertises. */
function namedNodes(nodes: readonly string[], urls: ReadonlyMap<string, string>): string {
  const named = nodes.map((n) => (urls.has(n) ? `${n} (${urls.get(n) ?? ''})` : n));
  return `${nodes.length === 1 ? 'node' : 'nodes'} ${named.join(', ')}`;
}

/**
 * The info line of live nodes whose entries hold no digests this node reads: a release
 * from before the digests (d525ea6), whose secrets cannot be compared with this node's.
 */
export function secretsNotComparedLine(nodes: readonly string[], urls: ReadonlyMap<string, string> = new Map()): string {
  const one = nodes.length === 1;
  return `${namedNodes(nodes, urls)} ${one ? 'runs an older release that publishes' : 'run an older release that publishes'} no digests of its secrets: `
    + `${one ? 'its' : 'their'} PIXIU_API_TOKEN and client-token key are not compared with this node's (a difference would show as 401s only); `
    + 'upgrade every node (README "Upgrades")';
}
