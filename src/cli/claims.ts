/**
 * The claims a CLI command puts in a client token it mints (`pixiu token`, `pixiu
 * connect`): read from comma-separated options and checked with the service's rules.
 */
import { maxHeaderSize } from 'node:http';
import { patternFailure } from '../api/pattern-rules.js';
import { isTag, tagSchema } from '../broadcast/filter.js';
import { CHANNEL_PATTERN, isChannelPattern } from '../channels/patterns.js';
import { StartupError } from '../errors.js';

/**
 * A comma-separated option as a list: each entry trimmed, empty ones dropped, an entry
 * given again dropped (a token's `tags: ["vip", "vip"]` says nothing more than one).
 * @param text the option's value; undefined when the option is not given (no entries)
 * @param flag the option as the user types it (`--tags`), for the refusal
 * @throws StartupError when the option is given but lists nothing (`--tags ''`,
 *   `--tags ,`): a script passing an empty variable would mint a token without the
 *   claim, silently (a black-box security tester's nit, walk22 F4)
 */
export function listOption(text: string | undefined, flag: string): string[] {
  if (text === undefined) return [];
  const entries = text.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (entries.length === 0) throw new StartupError(`${flag} ${JSON.stringify(text)} lists nothing: give one or more comma-separated entries, or leave ${flag} out`);
  return [...new Set(entries)];
}

/**
 * Refuses what the service would take but could never use: a tag no broadcast filter
 * can name, a channel pattern that allows no channel (docs/protocol.md, "Broadcasts"
 * and "Channels").
 * @throws StartupError naming the first such value and the rule
 */
export function checkClaims(tags: readonly string[], channels: readonly string[]): void {
  const tag = tags.find((t) => !isTag(t));
  // In the words the API answers a bad tag or channel with (pattern-rules.ts).
  if (tag !== undefined) throw new StartupError(`invalid --tags entry ${JSON.stringify(tag)}: ${patternFailure(tagSchema.pattern)}`);
  const pattern = channels.find((p) => !isChannelPattern(p));
  if (pattern !== undefined) {
    throw new StartupError(`invalid --channels entry ${JSON.stringify(pattern)}: ${patternFailure(CHANNEL_PATTERN)}, at most 128 characters, any segment of which may be * (like live.*.chat)`);
  }
}

/** Room left for the rest of a connect request's line and headers besides its token, bytes. */
const HEADER_ALLOWANCE = 512;

/**
 * Whether a connect or `/v1/me` request can carry `token` in its `Authorization` header:
 * the service holds a request's line and headers to Node's limit (`maxHeaderSize`,
 * 16 KiB; 431 past it), and {@link HEADER_ALLOWANCE} is left for the rest.
 */
export function fitsRequestHeaders(token: string): boolean {
  return Buffer.byteLength(token) + HEADER_ALLOWANCE <= maxHeaderSize;
}
