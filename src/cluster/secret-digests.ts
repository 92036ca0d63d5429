/**
 * The secrets every node sharing a Redis must agree on (DESIGN.md §7, §9), compared
 * without putting them in Redis: `PIXIU_API_TOKEN` (producers get 401 from a node with
 * another) and the client-token key (`PIXIU_JWT_SECRET`, `PIXIU_JWT_PUBLIC_KEY` or
 * `PIXIU_JWKS_URL`: clients get 401 from a node that cannot verify their token). A
 * node started without them generates its own and joined silently: the producers'
 * requests sent to it were refused 401, and nothing was logged (a black-box SRE's
 * finding). Each node puts a one-way digest of each in its shared-settings entry
 * (src/cluster/shared-settings.ts), and a starting node warns, at error, of every live
 * node whose digest differs.
 *
 * The digest of a secret is HMAC-SHA-256 keyed by the secret over a fixed label,
 * truncated to 64 bits (16 hex digits): it tells equal secrets from different ones and
 * nothing else. Whoever reads Redis can test a guess against it, so a token of little
 * entropy could be found by trying; one of 32 random bytes (what Pixiu generates, and
 * `openssl rand -base64 32` gives) cannot. Reading Redis already gives every message
 * and the cluster secret (docs/decisions.md, "Several nodes"). A public key is no
 * secret: its digest is that of its SPKI DER, so two PEM texts of one key compare
 * equal. A JWKS URL is not compared: the keys are fetched from it, and nodes may reach
 * one key set at different URLs (an internal and an external name); only the kind of
 * key source is.
 */
import { createHash, createHmac } from 'node:crypto';
import path from 'node:path';
import type { Secrets } from '../auth/secrets.js';
import { readPublicKey } from '../auth/pem-key.js';
import type { Config } from '../config/config.js';

/** The label each secret keys its HMAC over; versioned, so a new scheme never compares equal to an old one. */
export const DIGEST_LABEL = 'pixiu node-settings secret digest v1';

/** How a node's client tokens are verified, as its entry publishes it. */
type JwtKind = 'secret' | 'public-key' | 'jwks';

/** A node's secrets, as published in its shared-settings entry. */
export interface SecretDigests {
  /** Digest of the API token (16 hex digits). */
  readonly apiToken: string;
  /** The kind of client-token key source. */
  readonly jwtKind: JwtKind;
  /** Digest of the key (HS256 secret, or public key); undefined for a JWKS URL (not compared). */
  readonly jwtKey?: string;
}

/** This node's secrets: their digests, and which came from the data dir because no setting gave them. */
export interface NodeSecrets {
  readonly digests: SecretDigests;
  /** `api-token`, `jwt-secret`: the data dir's generated file is used, no setting was given. */
  readonly fromDataDir: readonly string[];
  /** Which of those this start generated (`Secrets.generated`). */
  readonly generated: readonly string[];
  /** The data dir's secrets folder. */
  readonly dir: string;
}

/** HMAC-SHA-256 of {@link DIGEST_LABEL} keyed by `secret`, first 64 bits in hex. */
export function secretDigest(secret: string | Buffer): string {
  return createHmac('sha256', secret).update(DIGEST_LABEL).digest('hex').slice(0, 16);
}

/** The digests of a node's secrets (never the secrets). */
export function secretDigests(secrets: Pick<Secrets, 'apiToken' | 'jwt'>): SecretDigests {
  const { jwt } = secrets;
  const jwtKey = jwt.kind === 'secret' ? secretDigest(jwt.secret)
    : jwt.kind === 'public-key' ? createHash('sha256').update(readPublicKey(jwt.pem).key.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16)
      : undefined;
  return { apiToken: secretDigest(secrets.apiToken), jwtKind: jwt.kind, ...(jwtKey === undefined ? {} : { jwtKey }) };
}

/** {@link NodeSecrets} of the secrets this node runs with. */
export function nodeSecrets(secrets: Secrets, config: Config): NodeSecrets {
  const fromDataDir = [
    ...(config.apiToken === undefined ? ['api-token'] : []),
    ...(config.jwtSecret === undefined && config.jwtPublicKey === undefined && config.jwksUrl === undefined ? ['jwt-secret'] : []),
  ];
  return { digests: secretDigests(secrets), fromDataDir, generated: secrets.generated, dir: secrets.dir };
}

/** Another node's published digests, if its entry has them (an older release's has none). */
export function readDigests(parsed: Record<string, unknown>): SecretDigests | undefined {
  const s = parsed.secrets as Partial<SecretDigests> | undefined;
  if (typeof s !== 'object' || s === null || typeof s.apiToken !== 'string') return undefined;
  if (s.jwtKind !== 'secret' && s.jwtKind !== 'public-key' && s.jwtKind !== 'jwks') return undefined;
  return { apiToken: s.apiToken, jwtKind: s.jwtKind, ...(typeof s.jwtKey === 'string' ? { jwtKey: s.jwtKey } : {}) };
}

/** Which secret differs: the API token, or the client-token key. */
export type SecretName = 'PIXIU_API_TOKEN' | 'client-token key';

/** The secrets of `theirs` that differ from `mine`. */
export function differingSecrets(mine: SecretDigests, theirs: SecretDigests): SecretName[] {
  const out: SecretName[] = [];
  if (mine.apiToken !== theirs.apiToken) out.push('PIXIU_API_TOKEN');
  if (mine.jwtKind !== theirs.jwtKind || (mine.jwtKind !== 'jwks' && mine.jwtKey !== theirs.jwtKey)) out.push('client-token key');
  return out;
}

/** The setting a key source comes from. */
const KIND_SETTING: Readonly<Record<JwtKind, string>> = {
  secret: 'PIXIU_JWT_SECRET', 'public-key': 'PIXIU_JWT_PUBLIC_KEY', jwks: 'PIXIU_JWKS_URL',
};

/**
 * The error line of a secret that differs between this node and `nodes` (which have
 * `theirs`): which secret, who gets 401, where this node's came from when no setting
 * gave it, that a rolling rotation shows it until the last node has the new one, and
 * what to do. Never a secret or a digest.
 */
export function secretMismatchLine(which: SecretName, here: NodeSecrets, theirs: SecretDigests, nodes: readonly string[]): string {
  const on = `${nodes.length === 1 ? 'node' : 'nodes'} ${nodes.join(', ')}`;
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
