/**
 * A data dir that stored messages, started on a Redis that does not know its store
 * (src/cluster/store-ownership.ts `checkKnown`; docs/decisions.md "Redis without the
 * store's claim"): an operator who points it at another Redis — here a data dir that
 * ran with the embedded Redis, started with PIXIU_REDIS_URL — is told at error level
 * that its inboxes are not there, and where they are. The start goes on (after a
 * real loss of Redis's data the service must).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/logger.js';
import { startService } from '../../src/service/service.js';
import { RedisServer } from '../harness/redis-server.js';
import { PixiuClient, cleanupList, tempDataDir } from '../harness/pixiu-server.js';
import { capturingLogger } from '../harness/log-capture.js';

const files = cleanupList();
after(() => files.run());

test('a data dir that ran with the embedded Redis, started on another Redis, logs at error that this Redis does not know its store, naming the embedded Redis\'s files; the message stays readable', async () => {
  const dataDir = await tempDataDir(files);
  // First run: the embedded Redis (no URL), one message stored.
  const embedded = await startService(loadConfig({}, { port: '0', logLevel: 'silent', claimsSettleMs: '0', dataDir }), createLogger('silent'));
  let posted: { id: string };
  try {
    const answer = await new PixiuClient(embedded.url, embedded.secrets.apiToken).post('/v1/messages', { to: 'alice', type: 't', data: 1 });
    assert.equal(answer.status, 201, answer.text);
    posted = answer.body as { id: string };
  } finally {
    await embedded.close();
  }

  // Second run: the same data dir on a Redis of its own.
  const redis = await RedisServer.start();
  files.after(() => redis.destroy());
  const { logger, lines } = capturingLogger();
  const config = loadConfig({}, { port: '0', claimsSettleMs: '0', dataDir, redisUrl: redis.url, redisPrefix: 'other:' });
  const service = await startService(config, logger);
  files.after(() => service.close());
  const errors = lines.filter((l) => l.level === 50);
  assert.equal(errors.length, 1, JSON.stringify(errors));
  const [line] = errors as [typeof errors[number]];
  assert.match(line.msg ?? '', /^this Redis does not know this data dir's store, which has stored messages/);
  assert.equal(line.redis, `${redis.url}, key prefix "other:"`);
  assert.equal(line.hint, `this data dir holds the embedded Redis's files (${path.join(dataDir, 'redis', 'appendonly')}): it ran with the embedded Redis, whose inboxes are there; start it without PIXIU_REDIS_URL to use them`);
  // Not refused: the node serves, and the stored message is still read by its id.
  const client = new PixiuClient(service.url, service.secrets.apiToken);
  const record = await client.get(`/v1/messages/${posted.id}`);
  assert.equal(record.status, 200, record.text);
  // The inbox is not on this Redis.
  const history = await client.get('/v1/users/alice/messages');
  assert.equal(history.status, 200, history.text);
  assert.equal((history.body as { latest_seq: number }).latest_seq, 0);
});
