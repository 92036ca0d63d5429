/**
 * After a SCRIPT FLUSH, while Redis refuses writes (OOM under `noeviction`), every
 * append refused names the cause, also appends sent together. Their EVALSHAs meet
 * NOSCRIPT and go again as EVAL; Redis refuses the EVAL (OOM) and loads nothing. Sent
 * again through the registered ioredis command, whose connection counted as having the
 * script once one EVAL was written on it (ioredis 6 `Script`, `socketHasScriptLoaded`),
 * a resend went as EVALSHA, met NOSCRIPT once more, and the one further try ioredis
 * makes raced the others' (written as EVALSHA once another's EVAL marked the
 * connection): some appends failed with NOSCRIPT, answered "Redis is unavailable"
 * instead of naming the full Redis (a flaky batch item in test/api/ops-more.test.ts).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { createRedis } from '../../src/redis/client.js';
import { encodeMsgId, MsgKind } from '../../src/ids/msg-id.js';
import { Inbox } from '../../src/inbox/inbox.js';
import { ClientIdClaims } from '../../src/cluster/client-id-claims.js';
import { Keys } from '../../src/redis/keys.js';
import { FULL, fullAfterFlush, refusals } from '../harness/script-flush.js';

/** Calls sent in one tick: enough that, without the fix, some lost the race every run. */
const TOGETHER = 8;

let server: RedisServer;
let redis: Redis;
let admin: Redis;

before(async () => {
  server = await RedisServer.start();
  redis = await createRedis({ url: server.url, commandTimeoutMs: 5000 });
  admin = await createRedis({ url: server.url, commandTimeoutMs: 5000, name: 'pixiu:test-admin' });
});

after(async () => {
  redis?.disconnect();
  admin?.disconnect();
  await server?.destroy();
});

test('after SCRIPT FLUSH, appends refused while Redis is full all name the cause, one alone then several sent together', async () => {
  const inbox = new Inbox(redis, { prefix: 'flush-append:', cap: 100 });
  const restore = await fullAfterFlush(admin);
  try {
    let counter = 0;
    const append = (uid: string): Promise<unknown> => inbox.append(uid, encodeMsgId({ partition: 0, kind: MsgKind.user, counter: ++counter }), MsgKind.user);
    // The first one's EVAL is written on the connection (and refused): ioredis counts it loaded since.
    assert.deepEqual(refusals(await Promise.allSettled([append('alone')])), [FULL]);
    const together = await Promise.allSettled(Array.from({ length: TOGETHER }, (_, i) => append(`u${i}`)));
    assert.deepEqual(refusals(together), Array<string>(TOGETHER).fill(FULL));
    const each = await inbox.appendEach(['e1', 'e2', 'e3'], encodeMsgId({ partition: 0, kind: MsgKind.user, counter: ++counter }), MsgKind.user);
    assert.deepEqual(refusals(each), Array<string>(3).fill(FULL));
  } finally {
    await restore();
  }
  assert.equal(await admin.dbsize(), 0, 'nothing written');
});

test('after SCRIPT FLUSH, client_msg_id settles refused while Redis is full all name the cause, several sent together', async () => {
  const claims = new ClientIdClaims(redis, new Keys('flush-settle:'), 'store-a');
  const restore = await fullAfterFlush(admin);
  try {
    const settle = (i: number): Promise<unknown> => claims.settle(`cmid-${i}`, encodeMsgId({ partition: 0, kind: MsgKind.user, counter: i + 1 }), Date.now() + 60_000);
    assert.deepEqual(refusals(await Promise.allSettled([settle(0)])), [FULL]);
    const together = await Promise.allSettled(Array.from({ length: TOGETHER }, (_, i) => settle(i + 1)));
    assert.deepEqual(refusals(together), Array<string>(TOGETHER).fill(FULL));
  } finally {
    claims.stop();
    await restore();
  }
});
