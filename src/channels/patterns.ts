/**
 * Channel names and the patterns in a JWT's `channels` claim (DESIGN.md §6, §8).
 *
 * A channel name is 1–128 characters of `A-Z a-z 0-9 . _ : -`, in segments separated
 * by `.` (e.g. `live.stream42.chat`). A pattern is a channel name in which a segment
 * may be `*`, matching exactly one whole segment: `live.*.chat` allows
 * `live.stream42.chat`, not `live.a.b.chat`; a pattern `*` allows any one-segment name.
 */
import { wordedPattern } from '../api/pattern-rules.js';

/** A channel name. */
export const CHANNEL_PATTERN = wordedPattern('^[A-Za-z0-9_:-]+(\\.[A-Za-z0-9_:-]+)*$', 'a channel name: segments of A-Z a-z 0-9 _ : - separated by single dots (like live.stream42.chat)');
const CHANNEL = new RegExp(CHANNEL_PATTERN);

/** Longest channel name. */
export const MAX_CHANNEL_LENGTH = 128;

/**
 * Most channels one connection may follow at once (src/channels/connection-channels.ts
 * holds a connection to it; `pixiu connect --sub` checks it before connecting).
 */
export const MAX_CHANNELS_PER_CONNECTION = 100;

/** True when `name` is a valid channel name. */
export function isChannelName(name: string): boolean {
  return name.length > 0 && name.length <= MAX_CHANNEL_LENGTH && CHANNEL.test(name);
}

/** Each whole `*` segment of a pattern. */
const WILDCARD_SEGMENT = /(?<=^|\.)\*(?=\.|$)/g;

/**
 * True when `pattern` is one a `channels` claim can use: a channel name whose
 * segments may also be `*` (each read as a one-character segment, so the name's
 * length limit holds too). Any other pattern allows no channel.
 */
export function isChannelPattern(pattern: string): boolean {
  return isChannelName(pattern.replace(WILDCARD_SEGMENT, 'x'));
}

/** True when `pattern` allows `channel` (segment by segment, `*` matching one segment). */
export function patternAllows(pattern: string, channel: string): boolean {
  const p = pattern.split('.');
  const c = channel.split('.');
  if (p.length !== c.length) return false;
  return p.every((seg, i) => seg === '*' || seg === c[i]);
}

/** True when any of `patterns` allows `channel`. */
export function channelAllowed(channel: string, patterns: readonly string[]): boolean {
  return isChannelName(channel) && patterns.some((p) => patternAllows(p, channel));
}
