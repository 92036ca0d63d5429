/**
 * CLI flags for every setting, built from the settings table so flags, environment
 * names and docs cannot drift apart (DESIGN.md §10: every setting has both).
 */
import { Command, Option } from 'commander';
import ms from 'ms';
import { loadConfig, type Config, type ConfigOverrides } from '../config/config.js';
import { SETTINGS, type SettingKey } from '../config/settings.js';
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
    const spec = { ...SETTINGS[key], doc: docs[key] ?? SETTINGS[key].doc };
    const isDuration = spec.kind === 'duration' || spec.kind === 'durations';
    const show = (v: unknown): string => (isDuration && typeof v === 'number' ? ms(v) : String(v));
    const def = spec.default === undefined ? '' : ` [default: ${Array.isArray(spec.default) ? spec.default.map(show).join(',') : show(spec.default)}]`;
    // A bare number is milliseconds, unlike the HTTP API's `ttl` (seconds): say so.
    const unit = isDuration ? '; a duration such as 500ms, 30s, 1h, 7d (a bare number is milliseconds)' : '';
    cmd.addOption(new Option(`--${spec.flag} <value>`, `${spec.doc}${unit} (env ${spec.env})${def}`).hideHelp(false));
  }
  return cmd;
}

/**
 * Reads the configuration from the environment and the flags `addConfigOptions` added.
 * @param docs the command's own words for settings, as given to `addConfigOptions`: a
 *   bad value is told what the command expects (see loadConfig)
 * @throws StartupError for a bad value (see loadConfig)
 */
export function configFromOptions(cmd: Command, only?: readonly SettingKey[], docs: Partial<Record<SettingKey, string>> = {}): Config {
  return loadConfig(process.env, optionOverrides(cmd, only), docs);
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
 * Checks a user id given on the command line with the API's rule (docs/api.md, "Input
 * rules"), so a command never mints a token the service would refuse.
 *
 * @throws StartupError naming the id and the rule
 */
export function checkUserId(uid: string): void {
  if (!isUserId(uid)) {
    throw new StartupError(`invalid user id ${JSON.stringify(uid)}: ${USER_ID_RULE}`);
  }
}
