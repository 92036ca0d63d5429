/**
 * The claims a CLI command puts in a client token it mints (`pixiu token`, `pixiu
 * connect`): read from comma-separated options and checked with the service's rules.
 */
import { isTag } from '../broadcast/routes.js';
import { isChannelPattern } from '../channels/patterns.js';
import { StartupError } from '../errors.js';

/** A comma-separated option as a list: each entry trimmed, empty ones dropped. */
export function listOption(text: string | undefined): string[] {
  return (text ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

/**
 * Refuses what the service would take but could never use: a tag no broadcast filter
 * can name, a channel pattern that allows no channel (docs/protocol.md, "Broadcasts"
 * and "Channels").
 * @throws StartupError naming the first such value and the rule
 */
export function checkClaims(tags: readonly string[], channels: readonly string[]): void {
  const tag = tags.find((t) => !isTag(t));
  if (tag !== undefined) throw new StartupError(`invalid --tags entry ${JSON.stringify(tag)}: a tag is 1–64 characters, no whitespace or control characters`);
  const pattern = channels.find((p) => !isChannelPattern(p));
  if (pattern !== undefined) {
    throw new StartupError(`invalid --channels entry ${JSON.stringify(pattern)}: a pattern is a channel name (up to 128 characters, segments of A-Z a-z 0-9 _ : - separated by single dots) whose segments may be *, like live.*.chat`);
  }
}
