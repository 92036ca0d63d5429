/**
 * What the kick tests share (kick-given-up, kick-resend): node registries of a short
 * lifetime, and a node's Kicks sending through a bus that only publishes. Kicks are
 * DESIGN.md §9's cross-node closes (src/gateway/kicks.ts).
 */
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Bus } from '../../src/cluster/bus.js';
import { NodeRegistry } from '../../src/cluster/node-registry.js';
import type { Presence } from '../../src/cluster/presence.js';
import { Kicks } from '../../src/gateway/kicks.js';
import { PendingHandshakes } from '../../src/gateway/pending-handshakes.js';
import { createLogger, type Logger } from '../../src/logger.js';
import type { Keys } from '../../src/redis/keys.js';
import type { LogLine } from '../harness/log-capture.js';
import type { CleanupContext } from '../harness/pixiu-server.js';

/**
 * A started registry of `node`: renewal 500 ms, lifetime 3 s, stopped with `cleanup`.
 * A lifetime of 300 ms lapsed on a loaded machine (a clean-clone CI run at load 14): a
 * deaf node's registration ran out between two late renewals, and its kicks were not
 * the ones given up on while it stayed registered.
 */
export async function registeredNode(redis: Redis, keys: Keys, cleanup: CleanupContext, node: string): Promise<NodeRegistry> {
  const registry = new NodeRegistry(redis, keys, { node, intervalMs: 500, ttlMs: 3000, logger: createLogger('silent') });
  await registry.start();
  cleanup.after(() => registry.stop());
  return registry;
}

/**
 * The Kicks of node `here`, sending through a bus never started (it only publishes, so
 * its subscriber connection is never used); presence, unless given, must not be read.
 * @param opts.givenUpLogMs the gathering of given-up kicks, ms
 */
export function sendingKicks(opts: {
  readonly redis: Redis; readonly keys: Keys; readonly registry: NodeRegistry; readonly givenUpLogMs: number;
  readonly logger?: Logger; readonly accepting?: () => boolean; readonly presence?: Pick<Presence, 'list' | 'closeConns'>;
}): Kicks {
  const logger = opts.logger ?? createLogger('silent');
  const bus = new Bus({ node: 'here', redis: opts.redis, subscriber: opts.redis, keys: opts.keys, logger, onNotify: () => undefined, onKick: () => undefined, onGone: () => undefined });
  const unused = (): never => assert.fail('presence is not read for a connection\'s kick');
  return new Kicks({
    node: 'here', bus, registry: opts.registry, presence: opts.presence ?? { list: unused, closeConns: unused },
    handshakes: new PendingHandshakes(), hub: { connectionsOf: () => [] }, accepting: opts.accepting ?? (() => true), logger, givenUpLogMs: opts.givenUpLogMs,
  });
}

/** The lines logging kicks given up on, of `lines`. */
export const givenUp = (lines: readonly LogLine[]): LogLine[] => lines.filter((l) => /^kicks? not received/.test(String(l.msg)));
