/**
 * CLI flags for every setting, built from the settings table so flags, environment
 * names and docs cannot drift apart (DESIGN.md §10: every setting has both).
 */
import { Command, Option } from 'commander';
import ms from 'ms';
import { accepts, loadConfig, type Config, type ConfigOverrides } from '../config/config.js';
import { SETTINGS, type SettingKey, type SettingSpec } from '../config/settings.js';
import { isUserId, USER_ID_RULE } from '../api/schemas.js';
import { StartupError } from '../errors.js';

/**
 * What `host` and `port` mean to a command that talks to a running service rather than
 * being it (connect): the settings table words them for `serve`.
 */
export const CLIENT_DOCS: Partial<Record<SettingKey, string>> = {
  host: 'host of the running service (an IP or host name)',
  port: 'port of the running service, 1 to 65535',
};

/**
 * Adds `--<flag> <value>` for every setting, or for the listed ones.
 * @param docs help text to use instead of the settings table's, by setting
 */
export function addConfigOptions(cmd: Command, only?: readonly SettingKey[], docs: Partial<Record<SettingKey, string>> = {}): Command {
  const keys = only ?? (Object.keys(SETTINGS) as SettingKey[]);
  for (const key of keys) {
    const spec: SettingSpec = { ...SETTINGS[key], doc: docs[key] ?? SETTINGS[key].doc };
    const isDuration = spec.kind === 'duration' || spec.kind === 'durations';
    const show = (v: unknown): string => (isDuration && typeof v === 'number' ? ms(v) : String(v));
    const note = spec.defaultNote === undefined ? '' : `, ${spec.defaultNote}`;
    const def = spec.default === undefined ? '' : ` [default: ${Array.isArray(spec.default) ? spec.default.map(show).join(',') : show(spec.default)}${note}]`;
    // A bare number is milliseconds, unlike the HTTP API's `ttl` (seconds): say so.
    const unit = isDuration ? '; a duration such as 500ms, 30s, 5m, 1h, 7d (a bare number is milliseconds; a unit in any case but M, refused as minutes or months)' : '';
    // A flag's value is in the process list for every user of the machine.
    const exposed = spec.secret === true ? `; as a flag it is visible to other users in ps: prefer ${spec.env}` : '';
    // The bounds a value is checked against, as a refusal words them: known before a start fails.
    cmd.addOption(new Option(`--${spec.flag} <value>`, `${accepts(spec)}${unit}${exposed} (env ${spec.env})${def}`).hideHelp(false));
  }
  return cmd;
}

/**
 * Reads the configuration from the environment and the flags `addConfigOptions` added.
 * With `only`, the environment's other settings are not read (they keep their
 * defaults): `pixiu token` run beside a shared env file whose `PIXIU_HEARTBEAT` is
 * bad must not refuse to mint over a setting it neither shows nor uses.
 * @param docs the command's own words for settings, as given to `addConfigOptions`: a
 *   bad value is told what the command expects (see loadConfig)
 * @throws StartupError for a bad value of a setting read (see loadConfig)
 */
export function configFromOptions(cmd: Command, only?: readonly SettingKey[], docs: Partial<Record<SettingKey, string>> = {}): Config {
  return loadConfig(only === undefined ? process.env : envFor(only), optionOverrides(cmd, only), docs);
}

/** `process.env` without the variables of the settings not in `only`. */
function envFor(only: readonly SettingKey[]): NodeJS.ProcessEnv {
  const kept = new Set(only);
  const unread = new Set<string>((Object.keys(SETTINGS) as SettingKey[]).filter((k) => !kept.has(k)).map((k) => SETTINGS[k].env));
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !unread.has(name)));
}

/** The settings given as flags of `cmd` (those of `only`, or all), as setting text by key. */
export function optionOverrides(cmd: Command, only?: readonly SettingKey[]): ConfigOverrides {
  const opts = cmd.opts<Record<string, string | undefined>>();
  const overrides: ConfigOverrides = {};
  for (const key of only ?? (Object.keys(SETTINGS) as SettingKey[])) {
    const attr = SETTINGS[key].flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const v = opts[attr];
    if (v !== undefined) overrides[key] = v;
  }
  return overrides;
}

/**
 * The rule of a `<uid>` on the command line, for the commands' help: the API's, and no
 * U+FFFD ({@link checkUserId}).
 */
export const CLI_USER_ID_RULE = `${USER_ID_RULE}; in UTF-8, and no U+FFFD (what the command line shows for bytes that were not UTF-8; an id really holding U+FFFD can only be named through the HTTP API)`;

/**
 * Checks a user id given on the command line with the API's rule (docs/api.md, "Input
 * rules"), so a command never mints a token the service would refuse, and refuses one
 * holding U+FFFD: Node decodes argv as UTF-8 and puts U+FFFD in place of bytes that are
 * not (`a\xff` arrives as `a\ufffd`), so the command would act as that other user
 * without a word. The API refuses a body of invalid UTF-8 for the same reason
 * (docs/api.md). The API takes an id that really holds U+FFFD (sent as UTF-8 or
 * `\ufffd`); the command line cannot tell one from bytes that were not UTF-8, so such
 * an id can only be named through the HTTP API, and the message says so.
 *
 * @throws StartupError naming the id and the rule
 */
export function checkUserId(uid: string): void {
  if (!isUserId(uid)) {
    throw new StartupError(`invalid user id ${JSON.stringify(uid)}: ${USER_ID_RULE}`);
  }
  if (uid.includes('\ufffd')) {
    throw new StartupError(`invalid user id ${JSON.stringify(uid)}: it holds U+FFFD, which is what the command line shows for bytes that were not UTF-8 (Node reads each such byte as U+FFFD, so the command could act as another user); give the id in UTF-8. An id that really holds U+FFFD can only be named through the HTTP API`);
  }
}
