/**
 * Configuration: read once at start from the environment (DESIGN.md §10 names) and
 * CLI flags, validated, then frozen. A bad value is a {@link StartupError} naming the
 * variable and what it accepts.
 */
import path from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import ms from 'ms';
import { StartupError } from '../errors.js';
import { durationRefusal, parseDuration } from './duration.js';
import { SETTINGS, type SettingKey, type SettingSpec } from './settings.js';

/** The validated, frozen configuration. Units are in the names (ms, bytes). */
export interface Config {
  readonly host: string;
  readonly port: number;
  /**
   * The listen backlog passed to `listen(2)` (Node's default is 511); the kernel caps it
   * at its own limit (Linux: `net.core.somaxconn`). docs/decisions.md, "Listen backlog".
   */
  readonly listenBacklog: number;
  /** Absolute path of the data root. */
  readonly dataDir: string;
  /**
   * Base URL other nodes read this node's store partitions at (DESIGN.md §9);
   * unset: `http://<host>:<port>` (src/cluster/store-ownership.ts).
   */
  readonly advertiseUrl: string | undefined;
  /** Unset: a local `redis-server` is started under the data dir. */
  readonly redisUrl: string | undefined;
  readonly redisPrefix: string;
  readonly redisCommandTimeoutMs: number;
  /**
   * Bound on one read of records from another node, body included, ms
   * (src/cluster/store-router.ts); `PIXIU_PEER_READ_TIMEOUT`, or when unset
   * {@link redisCommandTimeoutMs}, which bounded these reads before the setting was.
   */
  readonly peerReadTimeoutMs: number;
  readonly partitions: number;
  readonly storeDurability: 'fsync' | 'relaxed';
  readonly storeCacheBytes: number;
  /** How long a store partition write may be in flight before the partition is stalled, ms (src/store/write-stall.ts). */
  readonly storeWriteTimeoutMs: number;
  readonly messageTtlMs: number;
  readonly sweepIntervalMs: number;
  readonly maxMessageBytes: number;
  /**
   * After SIGTERM, how long `/readyz` answers 503 before the shutdown begins, ms; 0:
   * none (src/cli/serve.ts, docs/decisions.md "Drain delay").
   */
  readonly drainDelayMs: number;
  /** Node's `requestTimeout`, ms (docs/api.md, 408). */
  readonly requestTimeoutMs: number;
  /**
   * Node's `headersTimeout` (with `requestTimeoutMs` when that is smaller), ms: from a
   * connection's opening for its first request, from its first byte for a later one
   * (src/api/app.ts; docs/decisions.md "A node's bound on its sockets").
   */
  readonly headersTimeoutMs: number;
  /** How long a history answer may go untaken once its client can read it, ms (src/api/history-budget.ts). */
  readonly historyTakeTimeoutMs: number;
  readonly maxBodyBytes: number;
  /** Most recipients of one batch, room members counted (src/api/routes/batch-items.ts). */
  readonly batchMaxRecipients: number;
  readonly inboxCap: number;
  /** Devices with an ack cursor kept per user (ack-7.lua). */
  readonly maxDeviceCursors: number;
  readonly apiToken: string | undefined;
  readonly jwtSecret: string | undefined;
  readonly jwtPublicKey: string | undefined;
  readonly jwksUrl: string | undefined;
  /** The `aud` a client JWT must carry; undefined: not checked. */
  readonly jwtAudience: string | undefined;
  /** The `iss` a client JWT must carry; undefined: not checked. */
  readonly jwtIssuer: string | undefined;
  readonly allowedOrigins: readonly string[];
  /**
   * `PIXIU_TRUST_PROXY`: the proxies' addresses and ranges handed to fastify's
   * `trustProxy` (src/config/trust-proxy.ts checks each); empty: none trusted.
   */
  readonly trustProxy: readonly string[];
  readonly maxClientFrameBytes: number;
  readonly maxConnectionsPerUser: number;
  /** WebSocket handshakes one user may open on this node at once (a token bucket's size; src/gateway/user-rate.ts). */
  readonly connectBurst: number;
  /**
   * WebSocket connections this node holds at once, open or opening (every upgrade socket,
   * src/gateway/upgrade-guard.ts); undefined: derived at start from the open-files limit
   * (src/gateway/connection-bound.ts).
   */
  readonly maxConnections: number | undefined;
  /** WebSocket handshakes this node works on at once, all users together (src/gateway/handshake-slots.ts). */
  readonly maxHandshakes: number;
  /** WebSocket handshakes per minute one user may open on this node, sustained (the bucket's refill). */
  readonly connectRatePerMinute: number;
  readonly deliveryWindow: number;
  readonly ackTimeoutMs: number;
  readonly redeliveryBackoffMs: readonly number[];
  /** How old the claims must be before a new data dir's first claim on a shared Redis, ms (src/cluster/store-ownership.ts). */
  readonly claimsSettleMs: number;
  /** Time between the node's rounds of ack-cursor writes (DESIGN.md §5: 100 ms). */
  readonly ackFlushIntervalMs: number;
  readonly heartbeatMs: number;
  readonly idleTimeoutMs: number;
  readonly socketHighWaterBytes: number;
  readonly socketHardCapBytes: number;
  readonly pausedTimeoutMs: number;
  /**
   * Bytes all the node's WebSockets may hold unsent together (src/gateway/buffer-budget.ts);
   * 0: no bound; undefined: derived at start from the memory the process may use.
   */
  readonly socketBufferBudgetBytes: number | undefined;
  /** Wake delivery on append (true), or rely on heartbeat pulls only (false). */
  readonly notify: boolean;
  readonly broadcastStreamCap: number;
  /** Broadcast frames per second per node. */
  readonly broadcastRate: number;
  /** Publications kept per channel. */
  readonly channelHistory: number;
  /** How long a channel's history is kept after its last publication, ms. */
  readonly channelHistoryTtlMs: number;
  readonly roomSizeCap: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** Setting values given as text, keyed by setting name (what CLI flags produce). */
export type ConfigOverrides = Partial<Record<SettingKey, string>>;

/** Turns one setting's text into its typed value; `undefined` when it cannot be read. */
function parseText(spec: SettingSpec, text: string): unknown {
  switch (spec.kind) {
    case 'string':
      return spec.normalize ? spec.normalize(text) : text;
    case 'enum':
      // Any case, and spaces at either end, name the choice (`WARN`, `Info `: what many
      // deploy templates write; an SRE's finding): every choice is lowercase.
      return spec.choices?.find((c) => c === text.trim().toLowerCase()) ?? text;
    case 'int':
      return /^-?\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
    case 'duration':
      return parseDuration(text);
    case 'durations': {
      const parts = text.split(',').map((p) => parseDuration(p));
      return parts.some((p) => p === undefined) ? undefined : parts;
    }
    case 'list':
      return text.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  }
}

/**
 * What a setting accepts, in words, for error messages and `--help`: its doc, then
 * its bounds unless the doc says them already ("0 to 65535", "1s to 30d"), then its
 * choices.
 */
export function accepts(spec: SettingSpec): string {
  const duration = spec.kind.startsWith('duration');
  const said = (n: number): string => (duration ? ms(n) : String(n));
  const bounds =
    spec.min !== undefined && spec.max !== undefined && !/\d\S* to \d/.test(spec.doc)
      ? `, from ${said(spec.min)} to ${said(spec.max)}`
      : '';
  const choices = spec.choices ? ` (one of: ${spec.choices.join(', ')})` : '';
  return `${spec.doc}${bounds}${choices}`;
}

/**
 * What is wrong with the value of a {@link SettingSpec.secret} setting, without the
 * value: its length against the bound it misses (in characters, as Ajv counts
 * `minLength`: code points), or that its form is not the one required.
 */
function secretProblem(text: string, errors: readonly ErrorObject[] | null | undefined): string {
  const length = [...text].length;
  const said = new Set((errors ?? []).map((e) => {
    const limit = (e.params as { limit?: number }).limit;
    if (e.keyword === 'minLength') return `it is ${length} characters long, under the minimum of ${limit}`;
    if (e.keyword === 'maxLength') return `it is ${length} characters long, over the maximum of ${limit}`;
    return 'it does not have the required form';
  }));
  return said.size > 0 ? [...said].join('; ') : 'it cannot be read';
}

/**
 * The JSON schema a setting's value is checked with (after parsing: a number, a
 * string, a list). Exported for test/unit/config.test.ts, which checks every one
 * against JSON Schema's meta-schema (the Ajv below does not: see there).
 */
export function schemaFor(spec: SettingSpec): Record<string, unknown> {
  const num = { minimum: spec.min, maximum: spec.max };
  switch (spec.kind) {
    case 'string':
      return { type: 'string', ...spec.schema };
    case 'enum':
      return { type: 'string', enum: spec.choices };
    case 'int':
    case 'duration':
      return { type: 'integer', ...num, ...spec.schema };
    case 'durations':
      return { type: 'array', minItems: 1, maxItems: 20, items: { type: 'integer', ...num } };
    case 'list':
      return { type: 'array', items: { type: 'string', minLength: 1 } };
  }
}

const keys = Object.keys(SETTINGS) as SettingKey[];
// `validateSchema: false`: the settings' schemas are ours and fixed, and checked against
// the meta-schema by test/unit/config.test.ts; compiling the meta-schema cost ~50 ms of
// CPU in every `pixiu` command's first read of a setting.
const ajv = new Ajv({ allErrors: true, validateSchema: false });
const validators = new Map<SettingKey, ValidateFunction>();

/**
 * The schema check of one setting, compiled the first time a value of it is read:
 * most runs read a few settings (every `pixiu` command loads this module; `token`
 * reads seven), and compiling all of them up front cost ~0.1 s of CPU a start.
 * Exported for test/unit/config.test.ts, which compiles every setting's: a schema Ajv
 * refuses would otherwise show only when that one setting is given.
 * @throws Error (Ajv's) when the setting's schema does not compile
 */
export function validatorFor(key: SettingKey): ValidateFunction {
  let validate = validators.get(key);
  if (validate === undefined) {
    validate = ajv.compile(schemaFor(SETTINGS[key]));
    validators.set(key, validate);
  }
  return validate;
}

/**
 * What is wrong with a value refused, in words after `source="text" `: for a duration,
 * that it is none (and what one is) or that it is out of range (duration.ts); else
 * `is not valid`.
 */
function wrongValue(spec: SettingSpec, text: string): string {
  const said = spec.kind === 'duration' || spec.kind === 'durations' ? durationRefusal(text, spec.kind === 'durations') : undefined;
  return said ?? 'is not valid';
}

/**
 * Reads and checks one setting's text.
 *
 * @param source how the value is named in a problem: the variable, `--flag`, or a file
 * @returns the parsed value, or the problem: naming the source and what the setting
 *   accepts, with the value unless the setting is secret (then what is wrong with it)
 */
function readSetting(key: SettingKey, spec: SettingSpec, text: string, source: string): { value: unknown } | { problem: string } {
  const value = parseText(spec, text);
  const validate = validatorFor(key);
  if (value === undefined || !validate(value)) {
    return { problem: spec.secret === true
      ? `${source} is not valid: ${secretProblem(text, validate.errors)} (the value is not shown); expected: ${accepts(spec)}`
      : `${source}=${JSON.stringify(text)} ${wrongValue(spec, text)}; expected: ${accepts(spec)}` };
  }
  // What the schema cannot say (a Redis URL whose port is not a number), refused here
  // before anything starts.
  const entries = typeof value === 'string' ? [value] : spec.kind === 'list' ? value as string[] : [];
  const problem = spec.check === undefined ? undefined : entries.map(spec.check).find((p) => p !== undefined);
  if (problem !== undefined) {
    return { problem: spec.secret === true
      ? `${source} is not valid: ${problem} (the value is not shown)`
      : `${source}=${JSON.stringify(text)} is not valid: ${problem}` };
  }
  return { value };
}

/**
 * Checks a secret kept in a file by the rules of the setting it stands in for: the
 * `api-token` and `jwt-secret` generated in the data dir (src/auth/secrets.ts), which
 * may have been edited or truncated since.
 *
 * @param text the file's content, trimmed
 * @returns what is wrong, naming the file and never the value; undefined when good
 */
export function secretFileProblem(key: 'apiToken' | 'jwtSecret', file: string, text: string): string | undefined {
  const read = readSetting(key, SETTINGS[key], text, file);
  return 'problem' in read ? read.problem : undefined;
}

/**
 * The `PIXIU_` variables of `env` that name no setting: most likely typos
 * (`PIXIU_PROT`), which would otherwise be ignored without a word. Not an error, so
 * that a variable of a newer version does not stop an older one from starting.
 *
 * @returns the names, sorted
 */
export function unknownSettingVariables(env: NodeJS.ProcessEnv): string[] {
  const known: ReadonlySet<string> = new Set(Object.values(SETTINGS).map((spec): string => spec.env));
  return Object.keys(env).filter((name) => name.startsWith('PIXIU_') && !known.has(name)).sort();
}

/**
 * The duration settings given as a bare number (`PIXIU_MESSAGE_TTL=86400`): read as
 * milliseconds, which is seldom what a TTL of 86400 meant (86.4 s, not a day). Not an
 * error, since milliseconds are a fine unit; `pixiu serve` warns, so the reading is
 * seen at start rather than when messages expire early.
 *
 * @param env the environment, as {@link loadConfig} takes it
 * @param overrides setting text by key (CLI flags), as {@link loadConfig} takes them
 * @returns e.g. `PIXIU_MESSAGE_TTL=86400 is 86.4 s`, one per such setting, in settings order
 */
export function bareDurationSettings(env: NodeJS.ProcessEnv, overrides: ConfigOverrides = {}): string[] {
  return keys.flatMap((key) => {
    const spec = SETTINGS[key];
    const given = settingText(spec, env, overrides[key]);
    if (given === undefined || !spec.kind.startsWith('duration')) return [];
    const parts = given.text.split(',').map((p) => p.trim());
    // What parseDuration reads as milliseconds for want of a unit (`086400` and `1.5` too); 0 needs none.
    if (!parts.some((p) => /^[\d.]+$/.test(p) && parseDuration(p) !== 0)) return [];
    return [`${given.source}=${given.text} is ${parts.map((p) => `${(parseDuration(p) ?? 0) / 1000} s`).join(', ')}`];
  });
}

/**
 * The text a setting is given by: its flag's, else its variable's unless empty;
 * undefined when it is not given. `source` names it as problems do.
 */
function settingText(spec: SettingSpec, env: NodeJS.ProcessEnv, fromFlag: string | undefined): { text: string; source: string } | undefined {
  if (fromFlag !== undefined) return { text: fromFlag, source: `--${spec.flag}` };
  const fromEnv = env[spec.env];
  return fromEnv !== undefined && fromEnv !== '' ? { text: fromEnv, source: spec.env } : undefined;
}

/**
 * Reads, validates and freezes the configuration.
 *
 * Precedence: `overrides` (CLI flags) over `env` over the defaults of DESIGN.md §10.
 * An empty environment variable counts as unset.
 *
 * @param env the environment, normally `process.env`
 * @param overrides setting text by key, normally from CLI flags
 * @param docs what a setting is, by key, for a command that reads it in another sense
 *   than the service does (its error then says so): `pixiu connect`'s --host
 * @returns the frozen {@link Config}; `dataDir` is made absolute against the cwd, an
 *   unset `peerReadTimeoutMs` is `redisCommandTimeoutMs`
 * @throws StartupError naming the variable (or flag) and what it accepts, for every
 *   bad value at once, with the value unless the setting is secret (then what is wrong
 *   with it instead); also when more than one JWT key source is set
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: ConfigOverrides = {},
  docs: Partial<Record<SettingKey, string>> = {},
): Config {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  // How each setting given was given (`PIXIU_X` or `--x`), for the checks across settings.
  const sources: Partial<Record<SettingKey, string>> = {};
  const named = (key: SettingKey): string => sources[key] ?? `the default ${SETTINGS[key].env}`;
  for (const key of keys) {
    // A command that reads a setting in another sense (a client's --host is the
    // service's host, not a listen address) words what it expects its own way.
    const words = docs[key];
    const spec: SettingSpec = words === undefined ? SETTINGS[key] : { ...SETTINGS[key], doc: words };
    const given = settingText(spec, env, overrides[key]);
    if (given === undefined) {
      out[key] = spec.default;
      continue;
    }
    sources[key] = given.source;
    const read = readSetting(key, spec, given.text, given.source);
    if ('problem' in read) {
      problems.push(read.problem);
      continue;
    }
    out[key] = read.value;
  }
  const keySources = ['jwtSecret', 'jwtPublicKey', 'jwksUrl'].filter((k) => out[k] !== undefined);
  if (keySources.length > 1) {
    problems.push(
      `set only one of PIXIU_JWT_SECRET, PIXIU_JWT_PUBLIC_KEY, PIXIU_JWKS_URL (found ${keySources.length})`,
    );
  }
  if (typeof out.socketHardCapBytes === 'number' && typeof out.socketHighWaterBytes === 'number'
    && out.socketHardCapBytes < out.socketHighWaterBytes) {
    problems.push(`${named('socketHardCapBytes')} (${out.socketHardCapBytes} bytes) must be at least `
      + `${named('socketHighWaterBytes')} (${out.socketHighWaterBytes} bytes)`);
  }
  // A client that relies on the server's pings is silent between them: an idle timeout
  // no longer than the ping interval would cut every such client.
  if (typeof out.idleTimeoutMs === 'number' && typeof out.heartbeatMs === 'number'
    && out.idleTimeoutMs <= out.heartbeatMs) {
    problems.push(`${named('idleTimeoutMs')} (${out.idleTimeoutMs} ms) must be longer than ${named('heartbeatMs')} `
      + `(${out.heartbeatMs} ms): a connection that only answers the server's pings would be closed as idle`);
  }
  if (problems.length > 0) {
    throw new StartupError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  out.dataDir = path.resolve(String(out.dataDir));
  out.notify = out.notify === 'on';
  out.peerReadTimeoutMs ??= out.redisCommandTimeoutMs;
  out.redeliveryBackoffMs = Object.freeze([...(out.redeliveryBackoffMs as number[])]);
  out.allowedOrigins = Object.freeze([...(out.allowedOrigins as string[])]);
  out.trustProxy = Object.freeze([...(out.trustProxy as string[])]);
  return Object.freeze(out) as unknown as Config;
}
