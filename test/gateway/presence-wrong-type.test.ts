/**
 * A user whose `px:{uid}:replaced` key (what each presence add replaced,
 * presence-add-2.lua) has another type than Pixiu writes there (an operator's `SET`,
 * another program under the prefix). Before, a handshake replacing the device's
 * connection deleted the old entry and wrote its own, then failed on the key with
 * WRONGTYPE, and was answered 503 "retry later": its client retried for ever, each
 * retry half-writing again (review-presence F3). Now the add reads the key before it
 * writes anything: the handshake is 500 INTERNAL naming the user's presence, nothing in
 * Redis changed, the old connection stays, and the log names the key
 * (src/redis/wrong-type.ts, docs/api.md "Errors", 500). A handshake that replaces
 * nothing does not touch the key and connects.
 * As test/api/wrong-type-key.test.ts does for inbox keys: the real service in this
 * process on a private redis-server, its log captured.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Keys } from '../../src/redis/keys.js';
import { wrongTypeService } from '../harness/wrong-type-service.js';
import { Refused, TestClient, testToken } from '../harness/ws-client.js';

const PREFIX = 'wtp:';
const keys = new Keys(PREFIX);
const started = wrongTypeService(PREFIX);

/** Connects `device` of `user` (resuming from seq 0: no cursor read), or answers the refusal. */
async function connect(user: string, device: string): Promise<TestClient | Refused> {
  const { service } = started();
  return TestClient.connect(service.url, { token: await testToken(service.secrets.jwt, user), params: { device, last_seq: 0 } })
    .catch((err: unknown) => {
      if (err instanceof Refused) return err;
      throw err;
    });
}

test('a handshake replacing a device\'s connection while the user\'s replaced key is a string: 500 naming the user\'s presence, nothing written, the old connection kept, the key logged; another device connects; after DEL it replaces as ever', async () => {
  const { raw, lines } = started();
  const user = 'wtp-user';
  const conns = keys.conns(user);
  const replaced = keys.replaced(user);
  const old = await connect(user, 'phone');
  assert.ok(old instanceof TestClient);
  const before = await raw.hgetall(conns);
  assert.equal(Object.keys(before).length, 1);
  assert.equal(await raw.set(replaced, 'x'), 'OK');

  const from = lines.length;
  const refusal = await connect(user, 'phone');
  assert.ok(refusal instanceof Refused, 'the handshake connected');
  assert.equal(refusal.status, 500, refusal.text);
  assert.equal(refusal.headers.get('retry-after'), null, 'nothing to retry until it is repaired');
  const { error } = refusal.body as { error: { code: string; message: string } };
  assert.equal(error.code, 'INTERNAL');
  assert.equal(error.message, `internal error: user "${user}"'s presence cannot be used: a key of it in Redis holds another type (WRONGTYPE), `
    + 'which an operator must delete or repair (the node\'s log names it)', 'before: 503 "Redis is unavailable, retry later"');
  assert.deepEqual(await raw.hgetall(conns), before, 'before: the old entry replaced by the handshake\'s');
  assert.ok(lines.slice(from).some((l) => l.level === 50 && JSON.stringify(l).includes(`${replaced} (a string, not a hash)`)),
    JSON.stringify(lines.slice(from)));

  // Another device replaces nothing: it never reads the key.
  const laptop = await connect(user, 'laptop');
  assert.ok(laptop instanceof TestClient, String(laptop));
  await laptop.close();

  assert.equal(await raw.del(replaced), 1);
  const retry = await connect(user, 'phone');
  assert.ok(retry instanceof TestClient, String(retry));
  assert.equal((await old.waitClose()).code, 4002);
  await retry.close();
});
