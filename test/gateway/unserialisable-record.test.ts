/**
 * A stored record whose data cannot be serialised (nested far deeper than ingest now
 * accepts: stored before the depth limit existed) costs its seq, never the process:
 * delivery sends the `gap` an expired message would be and goes on with the next
 * message; history lists it in `gaps`; `GET /v1/messages/{id}` answers 404, not 500.
 *
 * Such a record can no longer be posted, so the test writes it into the store the
 * way an older release left it: a message is posted, the service is stopped, and the
 * record's `data` is replaced on disk with 100,000 nested arrays.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { messageKey } from '../../src/store/keys.js';
import { expectError } from '../harness/checks.js';
import { RedisServer } from '../harness/redis-server.js';
import { tempDataDir } from '../harness/pixiu-server.js';
import { expectFrame, expectWelcome, postOne } from './delivery-fixture.js';
import { startGateway } from './gateway-fixture.js';

const DEPTH = 100_000;

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

test('a record too deep to serialise is a gap in delivery and history and a 404 by id; the server stays up', async (t) => {
  const dataDir = await tempDataDir(t);
  const settings = { redisUrl: redis.url, redisPrefix: 'deep:', partitions: '1', dataDir };
  const first = await startGateway(t, settings);
  const poison = await postOne(first.client, 'poison', { data: 'placeholder' });
  await first.service.close();

  // Partition 0 of the store (src/service/service.ts: <dataDir>/xiu/<partition>).
  const db = new ClassicLevel<Buffer, Buffer>(path.join(dataDir, 'xiu', '0'), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  const key = messageKey(poison.id);
  const stored = (await db.get(key))?.toString('utf8') ?? '';
  assert.match(stored, /"data":"placeholder"/);
  const deep = `${'['.repeat(DEPTH)}1${']'.repeat(DEPTH)}`;
  await db.put(key, Buffer.from(stored.replace('"data":"placeholder"', `"data":${deep}`)));
  await db.close();

  const gw = await startGateway(t, settings);
  const next = await postOne(gw.client, 'poison', { data: 'after' });
  assert.equal(next.seq, poison.seq + 1);

  // Twice, as a reconnect would: each time the gap, then the next message.
  for (let round = 0; round < 2; round++) {
    const client = await gw.connect('poison', { device: `d${round}` });
    await expectWelcome(client, 1, next.seq);
    assert.deepEqual(await expectFrame(client, 'gap'), { t: 'gap', from: poison.seq, to: poison.seq, reason: 'undeliverable' });
    const msg = await expectFrame(client, 'msg');
    assert.equal(msg.seq, next.seq);
    assert.equal(msg.id, next.id);
    client.ack(next.seq);
    await client.close();
  }
  assert.equal((await gw.client.get('/healthz')).status, 200);

  const history = await gw.client.get('/v1/users/poison/messages');
  assert.equal(history.status, 200, history.text.slice(0, 300));
  const page = history.body as { messages: { seq: number }[]; gaps: unknown };
  assert.deepEqual(page.gaps, [{ from: poison.seq, to: poison.seq, reason: 'undeliverable' }]);
  assert.deepEqual(page.messages.map((m) => m.seq), [next.seq]);

  expectError(await gw.client.get(`/v1/messages/${poison.id}`), 404, 'NOT_FOUND', /nests deeper than/);
  assert.equal((await gw.client.get(`/v1/messages/${next.id}`)).status, 200);
});
