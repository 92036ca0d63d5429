/**
 * A channel followed on the node whose history key comes to hold another type (an
 * operator's `SET`) while the node's subscriber connection is down: the refill after
 * it is back cannot read the history, and no retry cures it. That is logged at error
 * naming the channel and the key (src/redis/wrong-type.ts), not as an outage's
 * warning that publications made meanwhile were lost: every publish failed on that
 * key, so none was. The subscriber connection alone is cut by test/harness/lag-proxy.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Keys } from '../../src/redis/keys.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { connectWith, publish, subscribe, waitTopics } from './channel-fixture.js';
import { subscriberProxyForFile } from './subscriber-proxy.js';

const captured = capturingLogger();
const service = subscriberProxyForFile(3, captured.logger);
const WRONG_TYPE_LOG = 'channel refill after the subscriber reconnected failed on a key of the wrong type';
const RETRY_LOG = 'channel refill after the subscriber reconnected failed; its reads are tried again until Redis answers, live publications held meanwhile';

test('a refill on a channel whose history key is a string is logged at error with the key, not as publications lost', { timeout: 30_000 }, async () => {
  const { gw, proxy, probe } = service();
  const channel = 'wt.a';
  const history = new Keys('px:').channelHistory(channel);
  const client = await connectWith(gw, 'viewer', ['wt.*']);
  await subscribe(client, channel);
  const first = await publish(gw.client, channel, 'first');
  assert.equal((await client.next()).id, first);

  const from = captured.lines.length;
  proxy.cut(true);
  await waitTopics(probe, 'px:', { [channel]: false });
  assert.equal(await probe.del(history), 1);
  assert.equal(await probe.set(history, 'not a stream'), 'OK');
  const refused = await gw.client.post(`/v1/channels/${channel}/publish`, { type: 't', data: 'during' });
  assert.equal(refused.status, 500, refused.text);
  proxy.cut(false);
  await waitTopics(probe, 'px:', { [channel]: true });

  const since = (): LogLine[] => captured.lines.slice(from);
  await waitUntil('the refill\'s error line', async () => since().some((l) => l.msg === WRONG_TYPE_LOG), 10_000);
  const line = since().find((l) => l.msg === WRONG_TYPE_LOG) as LogLine & { err: { keys: unknown } };
  assert.equal(line.level, 50);
  assert.equal(line.channel, channel);
  assert.deepEqual(line.err.keys, [{ key: history, type: 'string', expected: 'stream' }]);
  assert.deepEqual(since().filter((l) => l.msg === RETRY_LOG), [], 'nothing was published meanwhile: no read is tried again');

  // Repaired: the channel goes on live.
  assert.equal(await probe.del(history), 1);
  const after = await publish(gw.client, channel, 'after');
  assert.equal((await client.next(10_000)).id, after);
});
