/**
 * What the gateway's routes need, as an interface, so a route module depends on the
 * parts it uses and not on how the gateway was assembled (src/gateway/gateway.ts).
 */
import type { ClientClaims, TokenVerifier } from '../auth/jwt.js';
import type { Presence } from '../cluster/presence.js';
import type { Config } from '../config/config.js';
import type { Hub } from '../delivery/hub.js';
import type { Inbox } from '../inbox/inbox.js';
import type { Logger } from '../logger.js';
import type { RecordReader } from '../store/record-reader.js';
import type { ConnectionDeps, WsConnection } from './ws-connection.js';

/** The gateway's parts, as its routes see them. */
export interface GatewayDeps {
  readonly config: Config;
  readonly inbox: Inbox;
  /** Message records, wherever their partition is (src/cluster/store-router.ts). */
  readonly store: RecordReader;
  readonly verify: TokenVerifier;
  readonly presence: Presence;
  readonly hub: Hub;
  readonly logger: Logger;
  /** False once shutdown began: new connections are refused with 503. */
  readonly state: { accepting: boolean };
  /** Handed to every {@link WsConnection}. */
  readonly connection: ConnectionDeps;
  /** Closes one connection, here or on the node holding it. */
  kickConnection(user: string, conn: string, node: string, code: number, reason: string): void;
  /**
   * Closes a user's connections on every node (all, or one device's).
   * @returns how many connections were asked to close
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  kickUser(user: string, device: string | undefined, code: number, reason: string): Promise<number>;
  /** A connection was opened (metrics). */
  onOpen(conn: WsConnection, claims: ClientClaims): void;
}
