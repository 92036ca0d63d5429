/**
 * What the gateway does after a rotation of a user's inbox made on this node (session.ts
 * `onRotated`: a device's `last_seq` above the latest, a loss the node's deliveries
 * proved): the other nodes holding connections of the user, as presence lists them, are
 * asked to read the inbox now (bus.ts `pull`), so their connections get the new epoch's
 * `reset` at once, as this node's do, not at their next heartbeat (docs/protocol.md
 * "Where delivery starts", case 2). Pub/Sub is at-most-once: a lost request, or a
 * presence read that fails, leaves it to those connections' next heartbeat pull.
 */
import type { Bus } from '../cluster/bus.js';
import type { Presence } from '../cluster/presence.js';
import { outageFields } from '../errors.js';
import type { Logger } from '../logger.js';

/** What {@link wakeOtherNodes} needs. */
export interface RotationWakeDeps {
  /** This node's id: its own connections were reset by the rotation itself. */
  readonly node: string;
  readonly presence: Pick<Presence, 'list'>;
  readonly bus: Pick<Bus, 'pull'>;
  readonly logger: Logger;
}

/** Asks every other node holding a connection of `user` to read the user's inbox now. Returns at once; never rejects. */
export function wakeOtherNodes(deps: RotationWakeDeps, user: string): void {
  deps.presence.list(user).then((entries) => {
    for (const node of new Set(entries.map((e) => e.node))) if (node !== deps.node) deps.bus.pull(node, user);
  }, (err: unknown) => deps.logger.debug({ ...outageFields(err), user }, 'presence read after an epoch rotation failed; other nodes read at their heartbeat'));
}
