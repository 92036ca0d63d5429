/**
 * A read of stored messages from another node (`POST /internal/v1/records`,
 * src/cluster/store-router.ts) is bounded by `PIXIU_PEER_READ_TIMEOUT`, not by the Redis
 * command timeout it used to share: a node whose messages are held by a store whose
 * advertised URL accepts connections and never answers (a plain TCP server, registered
 * in Redis as that store's claim and lease) answers a `GET /v1/messages/{id}` of one of
 * them 503 UNAVAILABLE after about the peer timeout, whether the Redis command timeout
 * is far longer or far shorter. Unset, the peer timeout is the command timeout
 * (test/unit/config.test.ts).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { PartitionClaims } from '../../src/cluster/partition-claims.js';
import { MsgKind, encodeMsgId } from '../../src/ids/msg-id.js';
import { createRedis } from '../../src/redis/client.js';
import { Keys } from '../../src/redis/keys.js';
import { expectError } from '../harness/checks.js';
import { blackHole } from '../harness/local-http.js';
import { capturingLogger } from '../harness/log-capture.js';
import { startInProcess, type CleanupContext, type HttpAnswer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

/**
 * Starts a node under `prefix` with the two timeouts, registers a store `silent` whose
 * lease points at a black hole, and asks the node for a message of that store.
 * @returns the answer, and the warning the node logged for the failed read
 */
async function readFromSilentPeer(
  t: CleanupContext, prefix: string, timeouts: { peerReadTimeoutMs: string; redisCommandTimeoutMs: string },
): Promise<{ answer: HttpAnswer; reason: unknown }> {
  const { logger, lines } = capturingLogger();
  const { client } = await startInProcess(t, { redisUrl: redis.url, redisPrefix: prefix, storeDurability: 'relaxed', ...timeouts }, logger);
  const own = await createRedis({ url: redis.url, commandTimeoutMs: 2000, name: 'pixiu:test' });
  t.after(() => own.disconnect());
  const claims = new PartitionClaims(own, new Keys(prefix));
  const claimed = await claims.claim('silent', 8, undefined, { dir: '/elsewhere/xiu', host: 'elsewhere' });
  assert.equal(claimed.kind, 'held', JSON.stringify(claimed));
  const hole = await blackHole(t);
  await claims.renewLease('silent', { url: `http://127.0.0.1:${hole.port}`, node: 'silent-node' }, 60_000);
  const id = encodeMsgId({ partition: (claimed as { base: number }).base, kind: MsgKind.user, counter: 1 });
  const answer = await client.get(`/v1/messages/${id}`);
  await hole.reached;
  expectError(answer, 503, 'UNAVAILABLE', /^the node holding message store silent cannot be read now; retry later$/);
  const warning = lines.find((l) => l.msg === 'remote record read failed');
  return { answer, reason: warning?.reason };
}

test('PIXIU_PEER_READ_TIMEOUT shorter than the Redis command timeout: the read of a peer that never answers fails after it, not after the command timeout', async (t) => {
  const { answer, reason } = await readFromSilentPeer(t, 'peer-short:', { peerReadTimeoutMs: '300ms', redisCommandTimeoutMs: '20s' });
  assert.ok(answer.elapsedMs >= 290, `waited the peer timeout: ${Math.round(answer.elapsedMs)} ms`);
  assert.ok(answer.elapsedMs < 5000, `not the 20 s command timeout: ${Math.round(answer.elapsedMs)} ms`);
  assert.equal(reason, 'The operation was aborted due to timeout');
});

test('PIXIU_PEER_READ_TIMEOUT longer than the Redis command timeout: the read waits for the peer that long', async (t) => {
  const { answer, reason } = await readFromSilentPeer(t, 'peer-long:', { peerReadTimeoutMs: '1500ms', redisCommandTimeoutMs: '300ms' });
  assert.ok(answer.elapsedMs >= 1490, `waited the peer timeout, not the 300 ms command timeout: ${Math.round(answer.elapsedMs)} ms`);
  assert.ok(answer.elapsedMs < 10_000, `${Math.round(answer.elapsedMs)} ms`);
  assert.equal(reason, 'The operation was aborted due to timeout');
});
