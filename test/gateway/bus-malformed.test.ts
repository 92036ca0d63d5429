/**
 * Bus messages (Redis Pub/Sub, src/cluster/bus.ts) of a shape the handlers cannot take
 * are ignored as malformed: a kick without a `reason` string or with a code no close
 * frame carries, and a notify entry that is not `[user, seq]` (or `[user, seq, id]`), each threw out of the
 * subscriber's handler and crashed the node (any client of the Redis, or a node of
 * another version, was one PUBLISH away from it). A kick's reason is cut to the 123
 * bytes a close frame carries, not 120 characters (360 bytes of '€' threw), also when
 * the kick reaches a handshake not yet open (connect-route.ts closes it itself).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { startGateway } from './gateway-fixture.js';
import { PendingHandshakes } from '../../src/gateway/pending-handshakes.js';

let redis: RedisServer;

before(async () => {
  redis = await RedisServer.start();
});

after(async () => {
  await redis?.destroy();
});

for (const [name, kick] of [
  ['kick without a reason', { t: 'kick', user: 'kim', code: 4002 }],
  ['kick with a code no close frame can carry', { t: 'kick', user: 'kim', code: 1005, reason: 'x' }],
  ['kick with a reason of 120 three-byte characters (360 bytes; a close frame carries 123)', { t: 'kick', user: 'kim', code: 4002, reason: '€'.repeat(120) }],
  ['notify whose entry is not [user, seq]', { t: 'notify', users: [7] }],
  ['notify whose MsgID is not a string', { t: 'notify', users: [['kim', 1, 7]] }],
] as const) {
  test(`a ${name} published on a node's bus channel throws nothing out of the bus handler; the node stays up`, async (t) => {
    const errors: unknown[] = [];
    const onError = (err: unknown): void => { errors.push(err); };
    process.on('uncaughtException', onError);
    t.after(() => process.off('uncaughtException', onError));
    const gw = await startGateway(t, { redisUrl: redis.url, redisPrefix: `kk${name.length}:` });
    const { client } = await gw.connectWelcomed('kim', { device: 'phone' });
    const pub = new Redis(redis.url);
    t.after(() => pub.quit());
    const channels = await pub.pubsub('CHANNELS', `kk${name.length}:node:*`) as string[];
    assert.equal(channels.length, 1);
    assert.equal(await pub.publish(channels[0] as string, JSON.stringify(kick)), 1);
    // A well-formed kick after it: the channel keeps order, so once kim is closed the
    // message before was handled too (the '€' kick, well-formed once cut, closes kim itself).
    assert.equal(await pub.publish(channels[0] as string, JSON.stringify({ t: 'kick', user: 'kim', code: 4002, reason: 'after' })), 1);
    // Bounded (10 s, naming the wait): a kick left unhandled fails here, not at the file's timeout.
    const closed = await client.waitClose(10_000);
    assert.equal(closed.code, 4002);
    if (name.startsWith('kick with a reason')) assert.equal(Buffer.byteLength(closed.reason), 123, closed.reason);
    assert.deepEqual(errors.map(String), [], 'nothing thrown out of the bus handler');
    assert.equal((await gw.client.get('/healthz')).status, 200);
  });
}

test('a bus kick with a reason of 360 bytes reaching a pending handshake closes it with the kick code and the reason cut to 123 bytes', async (t) => {
  const gw = await startGateway(t, { redisUrl: redis.url, redisPrefix: 'hkr:' });
  const add = PendingHandshakes.prototype.add;
  t.after(() => { PendingHandshakes.prototype.add = add; });
  PendingHandshakes.prototype.add = function (this: PendingHandshakes, conn: string, user: string, device: string): void {
    add.call(this, conn, user, device);
    // What #kickLocal does with a bus kick arriving now (a bus message cannot be timed
    // into the handshake's pending window from outside).
    if (user === 'kim') this.kick({ user }, { code: 4002, reason: '€'.repeat(120) });
  };
  const client = await gw.connect('kim', { device: 'phone' });
  const closed = await client.waitClose(10_000);
  assert.equal(closed.code, 4002, `closed ${JSON.stringify(closed)}`);
  assert.equal(Buffer.byteLength(closed.reason), 123, closed.reason);
  assert.equal((await gw.client.get('/healthz')).status, 200);
});
