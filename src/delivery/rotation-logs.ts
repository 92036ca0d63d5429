/**
 * What a user's inbox epoch rotation logs when Redis answered it (session.ts
 * `#rotateEpoch`): made, or kept by the cool-down of a resume claim (epoch-guard.ts
 * `RESUME_ROTATION_COOLDOWN_MS`), each thinned across the node's users.
 */
import type { Logger } from '../logger.js';
import type { RotationCause } from './effects.js';
import { EVERY_LINE, thinnedFields, type LogThrottle } from '../log-throttle.js';

/**
 * The warning logged when an inbox gets a new epoch, by what showed it has less: the
 * node's own deliveries prove Redis lost appends; a device's `last_seq` may be Redis's
 * loss or the client's mistake, which the node cannot tell apart (docs/decisions.md,
 * "Redis with less than it had").
 */
const ROTATION_LOGS: Readonly<Record<RotationCause, string>> = {
  delivered: 'inbox came back from Redis with less than was delivered: new epoch, its devices are reset',
  resume: 'a device resumed from a last_seq above the inbox\'s latest under its epoch: Redis lost appends '
    + '(an older snapshot, a failover, keys evicted), or the client sent a wrong last_seq; new epoch, its devices are reset. '
    + 'After an unplanned failover or a restore, run pixiu redis lost-writes against the new primary (README "Redis failover"): '
    + 'the inboxes of users whose devices are away are not reset otherwise',
};

/** The line of a resume claim whose rotation the cool-down refused (epoch-guard.ts `RESUME_ROTATION_COOLDOWN_MS`). */
const KEPT_LOG = 'a device resumed from a last_seq above the inbox\'s latest under its epoch within the cool-down '
  + 'of the last such rotation: epoch kept, only that device is reset (a client that keeps its last_seq after a reset?)';

/** What the lines need (the session's deps: session.ts `SessionDeps`). */
export interface RotationLogDeps {
  readonly logger: Logger;
  /** Thins the warnings of rotations a device's `last_seq` asked for; default: every one. */
  readonly resumeRotationLog?: LogThrottle;
  /** Thins the lines of resume claims the cool-down kept from rotating; default: every one. */
  readonly resumeKeptLog?: LogThrottle;
}

/**
 * Logs a rotation's answer: a new epoch at warn, a kept one at info, both by `cause`;
 * one a device's claim asked for (`resume`) at debug past its throttle's share, one the
 * node's deliveries proved (`delivered`) never thinned.
 * @param context the user, the epoch asked to replace, and the inbox's epoch after the call (`newEpoch`: equal to `epoch` when kept)
 */
export function logRotation(deps: RotationLogDeps, context: { user: string; epoch: string; newEpoch: string | null }, cause: RotationCause): void {
  const { logger } = deps;
  const kept = context.newEpoch === context.epoch;
  const left = cause === 'delivered' ? 0 : ((kept ? deps.resumeKeptLog : deps.resumeRotationLog) ?? EVERY_LINE).take();
  if (left === undefined) logger.debug(context, kept ? KEPT_LOG : ROTATION_LOGS[cause]);
  else if (kept) logger.info({ ...context, ...thinnedFields(left) }, KEPT_LOG);
  else logger.warn({ ...context, ...thinnedFields(left) }, ROTATION_LOGS[cause]);
}
