/**
 * CLI flags for every setting, built from the settings table so flags, environment
 * names and docs cannot drift apart (DESIGN.md §10: every setting has both).
 */
import { Command, Option } from 'commander';
import { loadConfig, type Config, type ConfigOverrides } from '../config/config.js';
import { SETTINGS, type SettingKey } from '../config/settings.js';

/** Adds `--<flag> <value>` for every setting, or for the listed ones. */
export function addConfigOptions(cmd: Command, only?: readonly SettingKey[]): Command {
  const keys = only ?? (Object.keys(SETTINGS) as SettingKey[]);
  for (const key of keys) {
    const spec = SETTINGS[key];
    const def = spec.default === undefined ? '' : ` [default: ${Array.isArray(spec.default) ? spec.default.join(',') : String(spec.default)}]`;
    cmd.addOption(new Option(`--${spec.flag} <value>`, `${spec.doc} (env ${spec.env})${def}`).hideHelp(false));
  }
  return cmd;
}

/**
 * Reads the configuration from the environment and the flags `addConfigOptions` added.
 * @throws StartupError for a bad value (see loadConfig)
 */
export function configFromOptions(cmd: Command, only?: readonly SettingKey[]): Config {
  const opts = cmd.opts<Record<string, string | undefined>>();
  const overrides: ConfigOverrides = {};
  for (const key of only ?? (Object.keys(SETTINGS) as SettingKey[])) {
    const attr = SETTINGS[key].flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const v = opts[attr];
    if (v !== undefined) overrides[key] = v;
  }
  return loadConfig(process.env, overrides);
}
