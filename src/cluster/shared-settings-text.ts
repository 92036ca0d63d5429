/**
 * The words of the shared-settings mismatch warning (src/cluster/shared-settings.ts):
 * what a differing value does, setting by setting, and values as the settings show
 * them (a duration with its unit, `1d`, `3600ms`, as the settings take it). One
 * sentence for all — "a lower cap trims what the others keep" — did not fit the
 * connection limit or the channel history TTL, and a TTL showed as bare milliseconds,
 * "3600 … but 86400000" (a black-box SRE's finding).
 */
import { SETTINGS } from '../config/settings.js';
import type { SettingMismatch, SharedSetting } from './shared-settings.js';

/** What each node applying its own value does, per shared setting (docs/decisions.md, "Several nodes"). */
export const SETTING_EFFECTS: Readonly<Record<SharedSetting, string>> = {
  inboxCap: 'each node trims a user\'s inbox to its own cap at every append, so the lowest cap wins for every node: '
    + 'older messages the others promise to keep turn into gaps',
  maxDeviceCursors: 'each node drops the ack cursors past its own number at every ack, so the lowest wins for every node: '
    + 'a device whose cursor was dropped resumes as a new one unless it gives last_seq',
  maxConnectionsPerUser: 'each node counts a user\'s connections on every node against its own limit when a device connects, '
    + 'so one node refuses (429) a connection another accepts',
  roomSizeCap: 'each node checks a room\'s members against its own cap when members join, '
    + 'so a join one node refuses another accepts, and a room may hold more members than the lower cap',
  broadcastStreamCap: 'each node trims the shared broadcast stream to its own cap at every broadcast, so the lowest cap wins for every node: '
    + 'clients catching up get fewer broadcasts than the others keep',
  channelHistory: 'each node trims a channel\'s history to its own count at every publication, so the lowest wins for every node: '
    + 'a sub with since gets fewer publications than the others keep',
  channelHistoryTtlMs: 'each node sets a channel\'s history to expire its own TTL after every publication it makes, '
    + 'so a history lives as long as the TTL of the node that published last',
};

/** Units a duration is shown in, largest first, ms each: what the settings accept (`1d`, `12h`, `30s`). */
const UNITS: ReadonlyArray<readonly [string, number]> = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]];

/**
 * A value of `setting` as the settings take it: a duration in the largest unit that
 * divides it exactly (`1d`, `90s`), else in ms (`3600ms`); a count as it is.
 */
export function shownValue(setting: SharedSetting, value: number): string {
  if (SETTINGS[setting].kind !== 'duration') return String(value);
  const unit = UNITS.find(([, size]) => value !== 0 && value % size === 0);
  return unit === undefined ? `${value}ms` : `${value / unit[1]}${unit[0]}`;
}

/** The warning of one mismatch: the setting, both values with their units, the nodes, what it does, what to do. */
export function settingMismatchLine(m: SettingMismatch): string {
  return `${m.env} is ${shownValue(m.setting, m.here)} on this node but ${shownValue(m.setting, m.there)} on ${m.nodes.length === 1 ? 'node' : 'nodes'} ${m.nodes.join(', ')}: `
    + `${SETTING_EFFECTS[m.setting]}; give every node the same (docs/decisions.md, "Several nodes")`;
}
