/**
 * Waiting until a node claims `client_msg_id`s (src/cluster/client-id-claims.ts): a node
 * claims only once it has seen another store share its Redis, and it reads that every
 * 5 s (`REFRESH_MS`), so a node started before another claims none until its next read.
 */
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/redis/keys.js';
import { waitUntil } from './checks.js';
import type { PixiuClient } from './pixiu-server.js';

/** Counter of the probes' `client_msg_id`s (unique within a test process). */
let probes = 0;

/**
 * Resolves once the node `api` talks to claims `client_msg_id`s: a claim key appears in
 * `probe`'s Redis (prefix `px:`) for a message it stores, one to user `prober`.
 * @param node the node's name, for the failure message
 * @throws AssertionError when a probe is not stored (201), or none is claimed within 15 s
 */
export async function untilClaiming(api: PixiuClient, probe: Redis, node: string): Promise<void> {
  await waitUntil(`${node} claims client_msg_ids`, async () => {
    const cid = `probe-${probes++}`;
    assert.equal((await api.post('/v1/messages', { to: 'prober', type: 't', data: 1, client_msg_id: cid })).status, 201);
    return (await probe.exists(new Keys('px:').clientIdClaim(cid))) === 1;
  }, 15_000, 200);
}
