/**
 * What a connection's heartbeat does with its presence entry (DESIGN.md §6, docs/api.md
 * "Presence"): refreshes it, and closes the connection when the refresh finds it should
 * no longer be open — replaced by a newer connection of its device while its entry was
 * lost (4002), over the user's connection limit without it (1008), or closed by a
 * `DELETE …/connections` whose kick this node missed (the DELETE's code and reason:
 * src/cluster/presence.ts `closeConns`).
 */
import type { Presence } from '../cluster/presence.js';
import { CloseCode } from '../delivery/close-codes.js';
import type { Logger } from '../logger.js';
import type { WsConnection } from './ws-connection.js';

/** Refreshes `c`'s presence entry and acts on the outcome. Returns at once; never rejects (a failed refresh is a debug line). */
export function refreshOnHeartbeat(presence: Pick<Presence, 'refresh'>, c: WsConnection, logger: Logger): void {
  presence.refresh(c.user, c.id, c.device, c.since).then((outcome) => {
    // Its entry was lost (Redis lost presence) and the user connected again meanwhile.
    if (outcome === 'replaced') c.close(CloseCode.replaced, 'replaced by a newer connection of this device');
    else if (outcome === 'over-limit') c.close(CloseCode.policy, 'the user is at the connection limit without this connection');
    else if (typeof outcome === 'object') {
      logger.info({ conn: c.id, user: c.user, code: outcome.code }, 'connection closed on its presence refresh: a disconnect this node missed');
      c.close(outcome.code, outcome.reason);
    }
  }, (err: unknown) => logger.debug({ err, conn: c.id }, 'presence refresh failed'));
}
