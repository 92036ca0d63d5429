/**
 * The service opens its store with the durability PIXIU_STORE_DURABILITY names (DESIGN.md
 * §3, §10): `fsync` by default, every batch written with `sync: true` before the 201;
 * `relaxed` without. The store's own durability tests cover the store; this covers the
 * setting's way to it. Real Redis (a private redis-server) and a real LevelDB.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcessAlone } from '../harness/pixiu-server.js';
import { watchBatchWrites } from '../store/fixtures/batch-writes.js';

for (const [setting, sync] of [[undefined, true], ['relaxed', false], ['fsync', true]] as const) {
  test(`PIXIU_STORE_DURABILITY ${setting ?? 'unset'}: the service writes its store batches with sync: ${sync}`, async (t) => {
    const { server } = await startInProcessAlone(t, setting === undefined ? {} : { storeDurability: setting });
    const writes = watchBatchWrites(t);
    const res = await server.client.request('POST', '/v1/messages', { body: { to: ['alice', 'bob'], type: 'chat.text', data: { n: 1 }, client_msg_id: `durability-${setting ?? 'unset'}` } });
    assert.equal(res.status, 201);
    assert.ok(writes.syncs.length > 0, 'the message went through a batch write');
    assert.ok(writes.syncs.every((s) => s === sync), `every batch written with sync: ${sync} (${writes.syncs.join(', ')})`);
  });
}
