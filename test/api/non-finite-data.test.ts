/**
 * `data` round-trips exactly (DESIGN.md §3). A number literal too large for a double
 * (`1e400`) is valid JSON text but parses to Infinity, which `JSON.stringify` writes as
 * `null`: accepted, the producer would be told it was stored as sent while recipients
 * got `null`. It is refused 400 with nothing stored: single messages, batch items (the
 * item alone, named), broadcasts and channel publications (docs/api.md, "Input rules").
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanupList, type InProcessServer } from '../harness/pixiu-server.js';
import { startWithOwnRedis } from './api-fixture.js';

const files = cleanupList();
let server: InProcessServer;

before(async () => {
  server = await startWithOwnRedis(files);
});

after(() => files.run());

const OUT_OF_RANGE = /holds a number outside the range of a double/;

/** The user's inbox history: nothing is stored for a refused message. */
async function historyOf(user: string): Promise<unknown[]> {
  const page = await server.client.get(`/v1/users/${user}/messages`);
  assert.equal(page.status, 200, page.text);
  return (page.body as { messages: unknown[] }).messages;
}

test('a number literal past the double range in data is refused 400, nothing stored', async () => {
  for (const data of ['{"x":1e400}', '[1,[-1e999]]', '1e400']) {
    const answer = await server.client.post('/v1/messages', `{"to":"nf","type":"t","data":${data}}`);
    assert.equal(answer.status, 400, `${data}: ${answer.text}`);
    assert.equal((answer.body as { error: { code: string } }).error.code, 'INVALID_REQUEST');
    assert.match((answer.body as { error: { message: string } }).error.message, OUT_OF_RANGE);
  }
  assert.deepEqual(await historyOf('nf'), []);
});

test('finite numbers, tiny ones and large integers included, are still taken', async () => {
  const answer = await server.client.post('/v1/messages', '{"to":"nf-ok","type":"t","data":{"a":1.5e308,"b":1e-400,"c":-0.25}}');
  assert.equal(answer.status, 201, answer.text);
  const read = await server.client.get(`/v1/messages/${(answer.body as { id: string }).id}`);
  assert.deepEqual((read.body as { data: unknown }).data, { a: 1.5e308, b: 0, c: -0.25 });
});

test('a batch item with such a number fails alone, named; a broadcast and a channel publication are refused', async () => {
  const batch = await server.client.post('/v1/messages/batch', '{"messages":[{"to":"nf-b","type":"t","data":1},{"to":"nf-b","type":"t","data":{"x":1e400}}]}');
  assert.equal(batch.status, 200, batch.text);
  const [first, second] = (batch.body as { results: { status: number; error?: { message: string } }[] }).results;
  assert.equal(first?.status, 201);
  assert.equal(second?.status, 400);
  assert.match(second?.error?.message ?? '', /^messages\/1\/data holds a number outside/);
  assert.equal((await historyOf('nf-b')).length, 1);

  const broadcast = await server.client.post('/v1/broadcast', '{"type":"t","data":{"x":1e400}}');
  assert.equal(broadcast.status, 400, broadcast.text);
  assert.match((broadcast.body as { error: { message: string } }).error.message, OUT_OF_RANGE);
  const publication = await server.client.post('/v1/channels/nf-chan/publish', '{"type":"t","data":[1e400]}');
  assert.equal(publication.status, 400, publication.text);
  assert.match((publication.body as { error: { message: string } }).error.message, OUT_OF_RANGE);
});
