/**
 * `data` is any JSON value and round-trips exactly (DESIGN.md §3). A number literal too
 * large for a double (`1e400`) is valid JSON text but parses to Infinity: accepted with
 * 201 it is read back (and delivered) as `null`, the producer told it was stored as
 * sent. It must be refused (400) or come back as it went in.
 * (Outside the observability review's area; found while probing error bodies.)
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

test('a number literal past the double range in data is refused, not stored as null', async () => {
  const answer = await server.client.post('/v1/messages', '{"to":"nf","type":"t","data":{"x":1e400}}');
  if (answer.status === 400) return;
  assert.equal(answer.status, 201, answer.text);
  const id = (answer.body as { id: string }).id;
  const read = await server.client.get(`/v1/messages/${id}`);
  assert.notDeepEqual((read.body as { data: unknown }).data, { x: null }, `stored as sent was answered 201, read back as ${read.text}`);
});
