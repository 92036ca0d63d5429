/**
 * A channel's history key, or a publication's marker, holding another type than Pixiu
 * writes there (an operator's `SET`, another program under the prefix): every publish
 * to the channel (every one with that `client_msg_id`) fails with Redis's WRONGTYPE,
 * and so does every `sub` of it, and no retry cures it. A publish is answered 500
 * INTERNAL naming the channel, never a 503 "retry later" (a reviewer's finding, C3:
 * a producer retried for ever, nothing naming the key), logged at error with every
 * request it fails, naming the channel, the key, its type and the expected one. A `sub`
 * gets an `error` frame INTERNAL naming the channel, as a broadcast catch-up on a
 * wrong-type stream does (no `subscribed`, nothing followed), its line at error
 * (docs/api.md, "Errors", 500; docs/protocol.md "Channels"; src/redis/wrong-type.ts).
 * As test/broadcast/wrong-type-key.test.ts: the real service in this process on a
 * private redis-server, its log captured.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Keys } from '../../src/redis/keys.js';
import { SUB_FAILED_LOG } from '../../src/gateway/channel-frames.js';
import { errorLinesFrom, wrongTypeService, type WrongTypeLine } from '../harness/wrong-type-service.js';
import { TestClient, testToken, type Frame } from '../harness/ws-client.js';

const PREFIX = 'wc:';
const keys = new Keys(PREFIX);
const started = wrongTypeService(PREFIX);

/** The words of the 500 (or `error` frame) of a call on `channel` whose key is of the wrong type, up to what follows them. */
const WRONG_TYPE = (channel: string, verb: string): string => `internal error: channel "${channel}" cannot be ${verb}: a key of it in Redis holds `
  + 'another type (WRONGTYPE), which an operator must delete or repair (the node\'s log names it)';

/** Asserts the 500 INTERNAL of a publish to `channel` on a key of the wrong type, without Retry-After. */
function expectWrongType(answer: { status: number; headers: Headers; body: unknown }, channel: string): void {
  assert.equal(answer.status, 500, JSON.stringify(answer.body));
  assert.equal(answer.headers.get('retry-after'), null, 'nothing to retry until it is repaired');
  const { error } = answer.body as { error: { code: string; message: string } };
  assert.equal(error.code, 'INTERNAL');
  assert.equal(error.message, `${WRONG_TYPE(channel, 'written')}. Nothing was published; once it is repaired, send it again`);
}

/** The error lines logged since `from` with message `msg`. */
function errorLines(from: number, msg: string): WrongTypeLine[] {
  return errorLinesFrom(started().lines, from, msg);
}

test('a channel\'s history key a string: each publish, with or without client_msg_id, is 500 naming the channel, logged at error with the key; after DEL it publishes', async () => {
  const { client, raw, lines } = started();
  const channel = 'wc.hist';
  const history = keys.channelHistory(channel);
  assert.equal(await raw.set(history, 'not a stream'), 'OK');

  const from = lines.length;
  expectWrongType(await client.post(`/v1/channels/${channel}/publish`, { type: 't', data: 1 }), channel);
  expectWrongType(await client.post(`/v1/channels/${channel}/publish`, { type: 't', data: 1 }), channel);
  expectWrongType(await client.post(`/v1/channels/${channel}/publish`, { type: 't', data: 2, client_msg_id: 'wc-h1' }), channel);
  // One error line per request, not thinned as an outage's warnings are.
  const logged = errorLines(from, 'request failed');
  assert.equal(logged.length, 3, JSON.stringify(lines.slice(from)));
  for (const line of logged) {
    assert.equal(line.code, 'INTERNAL');
    assert.equal(line.err.channel, channel);
    assert.deepEqual(line.err.keys, [{ key: history, type: 'string', expected: 'stream' }]);
    assert.match(line.err.message, /^WRONGTYPE: channel "wc\.hist"'s key in Redis has another type than Pixiu writes there: wc:ch:\{wc\.hist\}:history \(a string, not a stream\)\. Publications to the channel and subscriptions to it \(sub, with or without since\) fail until an operator deletes or repairs it/);
  }
  assert.equal(await raw.get(history), 'not a stream', 'nothing was written over it');

  assert.equal(await raw.del(history), 1);
  const next = await client.post(`/v1/channels/${channel}/publish`, { type: 't', data: 3, client_msg_id: 'wc-h1' });
  assert.equal(next.status, 201, next.text);
});

test('a publication\'s marker (client_msg_id) key a hash: its publish is 500 naming the channel, logged with the marker key, nothing published; after DEL it publishes', async () => {
  const { client, raw, lines } = started();
  const channel = 'wc.mark';
  const marker = keys.channelMarker(channel, 'wc-m1');
  assert.equal(await raw.hset(marker, 'f', 'v'), 1);
  const body = { type: 't', data: { m: 1 }, client_msg_id: 'wc-m1' };

  const from = lines.length;
  expectWrongType(await client.post(`/v1/channels/${channel}/publish`, body), channel);
  const logged = errorLines(from, 'request failed');
  assert.equal(logged.length, 1, JSON.stringify(lines.slice(from)));
  assert.equal(logged[0]?.err.channel, channel);
  assert.deepEqual(logged[0]?.err.keys, [{ key: marker, type: 'hash', expected: 'string' }]);
  assert.equal(await raw.exists(keys.channelHistory(channel)), 0, 'nothing was published');

  // Another key on the channel is not affected.
  const other = await client.post(`/v1/channels/${channel}/publish`, { ...body, client_msg_id: 'wc-m2' });
  assert.equal(other.status, 201, other.text);

  assert.equal(await raw.del(marker), 1);
  const retry = await client.post(`/v1/channels/${channel}/publish`, body);
  assert.equal(retry.status, 201, retry.text);
  const again = await client.post(`/v1/channels/${channel}/publish`, body);
  assert.equal(again.status, 200, again.text);
  assert.equal((again.body as { id: string }).id, (retry.body as { id: string }).id);
});

test('a sub (with since, and without) of a channel whose history key is a string: an error frame INTERNAL naming the channel, nothing followed, logged at error with the key; after DEL the sub follows it', { timeout: 30_000 }, async () => {
  const { client, raw, lines, service } = started();
  const channel = 'wc.sub';
  const history = keys.channelHistory(channel);
  assert.equal(await raw.set(history, 'not a stream'), 'OK');
  const from = lines.length;
  const device = await TestClient.connect(service.url, { token: await testToken(service.secrets.jwt, 'wc-user', { channels: ['wc.*'] }) });
  try {
    assert.equal((await device.nextOf('welcome')).t, 'welcome');
    device.send({ t: 'sub', channel, since: '0-0' });
    const error = await device.next();
    assert.equal(error.t, 'error', JSON.stringify(error));
    assert.equal(error.code, 'INTERNAL');
    assert.equal(error.message, WRONG_TYPE(channel, 'read'));
    assert.deepEqual(error.ref, { t: 'sub', channel });
    const failed = errorLines(from, SUB_FAILED_LOG);
    assert.equal(failed.length, 1, JSON.stringify(lines.slice(from)));
    assert.equal(failed[0]?.channel, channel);
    assert.equal(failed[0]?.user, 'wc-user');
    assert.deepEqual(failed[0]?.err.keys, [{ key: history, type: 'string', expected: 'stream' }]);
    assert.equal(lines.slice(from).filter((l) => l.msg === SUB_FAILED_LOG && l.level === 40).length, 0, 'not an outage\'s warning');

    // Without since: the newest id cannot be read either.
    device.send({ t: 'sub', channel });
    const second = await device.next();
    assert.equal(second.code, 'INTERNAL', JSON.stringify(second));
    assert.equal(second.message, WRONG_TYPE(channel, 'read'));

    // Repaired: the sub follows it, and the next publication reaches it.
    assert.equal(await raw.del(history), 1);
    device.send({ t: 'sub', channel, since: '0-0' });
    const subscribed = await device.next();
    assert.deepEqual(subscribed, { t: 'subscribed', channel, since: '0-0' });
    const sent = await client.post(`/v1/channels/${channel}/publish`, { type: 't', data: 'after' });
    assert.equal(sent.status, 201, sent.text);
    let frame: Frame;
    do frame = await device.next(15_000);
    while (frame.t !== 'pub');
    assert.equal(frame.id, (sent.body as { id: string }).id);
    assert.deepEqual(device.frames.map((f) => f.t), ['welcome', 'error', 'error', 'subscribed', 'pub'], 'no other frame: nothing told lost');
  } finally {
    await device.close();
  }
});
