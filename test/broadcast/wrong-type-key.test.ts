/**
 * The broadcast stream's key, or a broadcast's marker, holding another type than Pixiu
 * writes there (an operator's `SET`, another program under the prefix): every
 * broadcast fails with Redis's WRONGTYPE, and no retry cures it. Answered 500 INTERNAL
 * naming the broadcast stream, never a 503 "retry later" (a reviewer's finding, F2),
 * logged at error with every request it fails, naming the key, its type and the
 * expected one. The node's reader logs its failed reads at error naming the key, and
 * retries them; a client reconnecting with `last_bseq` is not told its stream was lost
 * (`reset`: broadcast-bounds-1.lua read the key as a missing stream) but gets an
 * `error` naming the broadcast stream, as a catch-up that cannot be read (docs/api.md,
 * "Errors", 500; docs/protocol.md "Broadcasts"; src/redis/wrong-type.ts). The real
 * service in this process on a private redis-server, its log captured.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Keys } from '../../src/redis/keys.js';
import { BroadcastReader, READ_FAILED_LOG } from '../../src/broadcast/reader.js';
import { BroadcastStream, type BroadcastEntry } from '../../src/broadcast/broadcast-stream.js';
import { createRedis } from '../../src/redis/client.js';
import { CATCH_UP_FAILED_LOG } from '../../src/gateway/catch-up-failure.js';
import { waitUntil } from '../harness/checks.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { TestClient, testToken, type Frame } from '../harness/ws-client.js';
import { errorLinesFrom, wrongTypeService, type WrongTypeLine } from '../harness/wrong-type-service.js';

const PREFIX = 'wb:';
const keys = new Keys(PREFIX);
const started = wrongTypeService(PREFIX);

/** The words of the 500 of a broadcast whose key is of the wrong type, up to what follows them. */
const WRONG_TYPE = (verb: string): string => `internal error: the broadcast stream cannot be ${verb}: a key of it in Redis holds another type (WRONGTYPE), `
  + 'which an operator must delete or repair (the node\'s log names it)';

/** Asserts the 500 INTERNAL of a broadcast POST on a key of the wrong type, without Retry-After. */
function expectWrongType(answer: { status: number; headers: Headers; body: unknown }): void {
  assert.equal(answer.status, 500, JSON.stringify(answer.body));
  assert.equal(answer.headers.get('retry-after'), null, 'nothing to retry until it is repaired');
  const { error } = answer.body as { error: { code: string; message: string } };
  assert.equal(error.code, 'INTERNAL');
  assert.equal(error.message, `${WRONG_TYPE('written')}. Nothing was published; once it is repaired, send it again`);
}

/** The error lines logged since `from` with message `msg`. */
function errorLines(from: number, msg: string): WrongTypeLine[] {
  return errorLinesFrom(started().lines, from, msg);
}

test('the broadcast stream a list: a POST is 500 naming it, logged at error with the key; the reader logs its reads at error; a client with last_bseq gets an error, not a reset; after DEL it gets the next broadcast', { timeout: 60_000 }, async () => {
  const { client, raw, lines, service } = started();
  const first = await client.post('/v1/broadcast', { type: 't', data: { n: 0 } });
  assert.equal(first.status, 201, first.text);
  const lastBseq = (first.body as { bseq: string }).bseq;
  const stream = keys.broadcast();
  assert.equal(await raw.del(stream), 1);
  assert.equal(await raw.rpush(stream, 'not a stream'), 1);

  const from = lines.length;
  for (let i = 0; i < 2; i++) expectWrongType(await client.post('/v1/broadcast', { type: 't', data: { n: 1 } }));
  const logged = errorLines(from, 'request failed');
  assert.equal(logged.length, 2, JSON.stringify(lines.slice(from)));
  for (const line of logged) {
    assert.equal(line.code, 'INTERNAL');
    assert.deepEqual(line.err.keys, [{ key: stream, type: 'list', expected: 'stream' }]);
    assert.match(line.err.message, /^WRONGTYPE: the broadcast stream's key in Redis has another type than Pixiu writes there: wb:broadcast \(a list, not a stream\)\. Broadcasts, the node's reading of them and clients' catch-ups \(last_bseq\) fail until an operator deletes or repairs it/);
  }

  // The node's reader: its blocking read fails (within its 5 s block), logged at error with the key, and retried.
  await waitUntil('the reader\'s error line', async () => errorLines(from, READ_FAILED_LOG).length > 0, 15_000);
  assert.deepEqual(errorLines(from, READ_FAILED_LOG)[0]?.err.keys, [{ key: stream, type: 'list', expected: 'stream' }]);
  assert.equal(lines.slice(from).filter((l) => l.msg === READ_FAILED_LOG && l.level === 40).length, 0, 'not an outage\'s warning');

  // A client reconnecting with last_bseq: not told its stream was lost.
  const device = await TestClient.connect(service.url, { token: await testToken(service.secrets.jwt, 'wb-user'), params: { last_bseq: lastBseq } });
  try {
    const error = await device.nextOf('error', 10_000);
    assert.equal(error.code, 'INTERNAL');
    assert.equal(error.message, WRONG_TYPE('read'));
    const caughtUp = errorLines(from, CATCH_UP_FAILED_LOG);
    assert.equal(caughtUp.length, 1, JSON.stringify(lines.slice(from).filter((l) => l.msg === CATCH_UP_FAILED_LOG)));
    assert.deepEqual(caughtUp[0]?.err.keys, [{ key: stream, type: 'list', expected: 'stream' }]);

    // Repaired: the next broadcast reaches it. No gap: nothing was published meanwhile,
    // and the node's reader had handed out everything up to its last_bseq.
    assert.equal(await raw.del(stream), 1);
    const next = await client.post('/v1/broadcast', { type: 't', data: { n: 2 } });
    assert.equal(next.status, 201, next.text);
    const bseq = (next.body as { bseq: string }).bseq;
    let frame: Frame;
    do frame = await device.next(15_000);
    while (frame.bseq !== bseq);
    assert.deepEqual(device.frames.filter((f) => f.t === 'reset'), [], 'no reset: the stream was never reported lost');
    assert.deepEqual(device.frames.map((f) => f.t), ['welcome', 'error', 'bcast']);
  } finally {
    await device.close();
  }
});

test('a broadcast\'s marker of the wrong type: a retry with its client_msg_id is 500 naming the broadcast stream, logged with the marker key; after DEL it is published', async () => {
  const { client, raw, lines } = started();
  const body = { type: 't', data: { m: 1 }, client_msg_id: 'wb-m1' };
  const sent = await client.post('/v1/broadcast', body);
  assert.equal(sent.status, 201, sent.text);
  const marker = keys.broadcastMarker((sent.body as { id: string }).id);
  assert.equal(await raw.del(marker), 1);
  assert.equal(await raw.rpush(marker, 'not a string'), 1);

  const from = lines.length;
  expectWrongType(await client.post('/v1/broadcast', body));
  const logged = errorLines(from, 'request failed');
  assert.equal(logged.length, 1, JSON.stringify(lines.slice(from)));
  assert.deepEqual(logged[0]?.err.keys, [{ key: marker, type: 'list', expected: 'string' }]);

  assert.equal(await raw.del(marker), 1);
  const retry = await client.post('/v1/broadcast', body);
  assert.ok(retry.status === 200 || retry.status === 201, retry.text);
  assert.equal((retry.body as { id: string }).id, (sent.body as { id: string }).id);
});

test('a reader starting on a broadcast stream key of the wrong type starts, logs it at error and retries; once repaired it hands out what is published', { timeout: 30_000 }, async (t) => {
  const { raw, redisUrl } = started();
  // A prefix of its own: the service's reader is not disturbed.
  const own = new Keys('wb-start:');
  const stream = new BroadcastStream(raw, own, 100);
  assert.equal(await raw.set(own.broadcast(), 'oops'), 'OK');
  const captured = capturingLogger();
  const readerRedis = await createRedis({ url: redisUrl, commandTimeoutMs: 10_000, name: 'pixiu:test-reader', blocking: true });
  const got: BroadcastEntry[] = [];
  const reader = new BroadcastReader({
    redis: readerRedis, stream, logger: captured.logger,
    onEntries: async (entries) => { got.push(...entries); },
    onLost: async () => { assert.fail('nothing was lost'); },
  });
  await reader.start();
  t.after(() => reader.stop());
  assert.equal(reader.position, '0-0');
  const failed = (): LogLine[] => captured.lines.filter((l) => l.msg === READ_FAILED_LOG);
  await waitUntil('two failed reads', async () => failed().length >= 2, 10_000);
  for (const line of failed()) {
    assert.equal(line.level, 50);
    assert.deepEqual((line as WrongTypeLine).err.keys, [{ key: own.broadcast(), type: 'string', expected: 'stream' }]);
  }
  assert.equal(await raw.del(own.broadcast()), 1);
  const bseq = await stream.publish({ msgId: '0300000000000001', type: 't', ts: Date.now(), dataJson: '{}', filter: undefined, expiresAt: Date.now() + 60_000 });
  await waitUntil('the broadcast handed out', async () => got.length > 0, 15_000);
  assert.deepEqual(got.map((e) => e.id), [bseq]);
});
