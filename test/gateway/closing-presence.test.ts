/**
 * A connection the server has closed (a close frame sent) stays a socket until its peer
 * answers the close, or for a grace period after which it is cut. In that time it is
 * no connection any more: its heartbeat must not run, or its presence refresh writes
 * back the entry DELETE /v1/users/{uid}/connections has just removed, and the user
 * shows online (and holds a slot of the connection limit) after being disconnected.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Duplex } from 'node:stream';
import { waitUntil } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import { serverSockets, startGateway, type GatewayFixture } from './gateway-fixture.js';

let gw: GatewayFixture;
let sockets: Map<string, Duplex>;

fileRedis(async ({ redis, cleanup }) => {
  // Heartbeats every 200 ms: several of them fall within the close's grace period.
  gw = await startGateway(cleanup, { redisUrl: redis.url, heartbeatMs: '200' });
  sockets = serverSockets(gw);
});

async function online(user: string): Promise<boolean> {
  const answer = await gw.client.get(`/v1/users/${user}/presence`);
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { online: boolean }).online;
}

test('a disconnected user whose socket waits for the close handshake is not shown online again by its heartbeat', async () => {
  const { client } = await gw.connectWelcomed('lingerer', { device: 'stuck' });
  await waitUntil('the connection is in presence', () => online('lingerer'));
  // The server stops reading this socket: the client's answer to the close never
  // arrives, and the socket lives until the server cuts it.
  sockets.get('stuck')?.pause();
  let ended = false;
  const closed = client.waitClose(20_000).finally(() => { ended = true; });
  const kicked = await gw.client.request('DELETE', '/v1/users/lingerer/connections');
  assert.deepEqual(kicked.body, { user: 'lingerer', closed: 1 });
  // Until the socket is cut, presence is read again and again: never online.
  const seen: boolean[] = [];
  while (!ended) {
    seen.push(await online('lingerer'));
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal((await closed).code, 1008);
  assert.ok(seen.length > 0);
  assert.deepEqual(seen.filter((o) => o), [], `online in ${seen.filter((o) => o).length} of ${seen.length} reads after the DELETE`);
});
