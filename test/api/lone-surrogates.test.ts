/**
 * A lone UTF-16 surrogate in `data` (`"\ud83d"` with no low surrogate after it, also as
 * a key) is refused 400, nothing stored, naming where it is: strict JSON decoders (Rust's
 * serde_json, Swift's) refuse a frame holding one, so its recipient could never ack it
 * and its inbox stalled behind it (an integrator newcomer's finding). Single messages,
 * batch items (the item alone), broadcasts and channel publications; a surrogate pair
 * (an emoji written as two escapes) is still taken (docs/api.md, "Input rules").
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

/** The message of a 400 INVALID_REQUEST answer. */
function refusal(answer: { status: number; text: string; body: unknown }): string {
  assert.equal(answer.status, 400, answer.text);
  const { code, message } = (answer.body as { error: { code: string; message: string } }).error;
  assert.equal(code, 'INVALID_REQUEST');
  return message;
}

async function historyOf(user: string): Promise<unknown[]> {
  const page = await server.client.get(`/v1/users/${user}/messages`);
  assert.equal(page.status, 200, page.text);
  return (page.body as { messages: unknown[] }).messages;
}

test('a lone surrogate in a message\'s data, as a value or a key at any depth, is refused 400 naming where, nothing stored', async () => {
  const cases: [string, RegExp][] = [
    ['{"s":"ok \\ud83d end"}', /^data\/s holds a lone surrogate \(\\ud83d\), which strict JSON decoders/],
    ['{"k":{"\\ud800":1}}', /^data\/k has a key holding a lone surrogate \(\\ud800\)/],
    ['"\\uDC00"', /^data holds a lone surrogate \(\\udc00\)/],
    ['[1,{"a/b":["x","\\ude00\\ud83d"]}]', /^data\/1\/a~1b\/1 holds a lone surrogate \(\\ude00\)/],
  ];
  for (const [data, expected] of cases) {
    const answer = await server.client.post('/v1/messages', `{"to":"ls","type":"t","data":${data}}`);
    assert.match(refusal(answer), expected, data);
  }
  assert.deepEqual(await historyOf('ls'), []);
});

test('a surrogate pair (an emoji as two escapes) is taken and comes back as sent', async () => {
  const answer = await server.client.post('/v1/messages', '{"to":"ls-ok","type":"t","data":{"\\ud83d\\ude00":"a \\ud83d\\ude00 b"}}');
  assert.equal(answer.status, 201, answer.text);
  const read = await server.client.get(`/v1/messages/${(answer.body as { id: string }).id}`);
  assert.deepEqual((read.body as { data: unknown }).data, { '😀': 'a 😀 b' });
});

test('a batch item with a lone surrogate fails alone, named; a broadcast and a channel publication are refused', async () => {
  const batch = await server.client.post('/v1/messages/batch',
    '{"messages":[{"to":"ls-b","type":"t","data":"\\ud83d\\ude00"},{"to":"ls-b","type":"t","data":{"k":"\\ud800"}},{"to":"ls-b","type":"t","data":2}]}');
  assert.equal(batch.status, 200, batch.text);
  const results = (batch.body as { results: { status: number; error?: { message: string } }[] }).results;
  assert.deepEqual(results.map((r) => r.status), [201, 400, 201]);
  assert.match(results[1]?.error?.message ?? '', /^messages\/1\/data\/k holds a lone surrogate \(\\ud800\)/);
  assert.equal((await historyOf('ls-b')).length, 2);

  assert.match(refusal(await server.client.post('/v1/broadcast', '{"type":"t","data":"\\ud800"}')), /^data holds a lone surrogate/);
  assert.match(refusal(await server.client.post('/v1/channels/ls-chan/publish', '{"type":"t","data":{"\\udfff":0}}')), /^data has a key holding a lone surrogate/);
  const pair = await server.client.post('/v1/channels/ls-chan/publish', '{"type":"t","data":"\\ud83d\\ude00"}');
  assert.equal(pair.status, 201, pair.text);
});

test('a lone surrogate in a broadcast tag or an id is refused naming it as data\'s is; in an ASCII-only field its rule is said', async () => {
  const tagged = (tags: string): Promise<{ status: number; text: string; body: unknown }> =>
    server.client.post('/v1/broadcast', `{"type":"t","data":1,"tags":${tags}}`);
  assert.match(refusal(await tagged('{"all":["vip\\ud800"]}')),
    /^body\/tags\/all\/0 holds a lone surrogate \(\\ud800\), which strict JSON decoders \(Rust, Swift\) refuse: send whole characters/);
  assert.match(refusal(await tagged('{"any":["ok","\\udfff"]}')), /^body\/tags\/any\/1 holds a lone surrogate \(\\udfff\)/);
  const pair = await tagged('{"any":["vip\\ud83d\\ude00"]}');
  assert.equal(pair.status, 201, pair.text);
  // Any field whose rule takes other characters: the surrogate is what it refuses.
  assert.match(refusal(await server.client.post('/v1/messages', '{"to":"ls-\\ud83d","type":"t","data":1}')), /^body\/to holds a lone surrogate \(\\ud83d\)/);
  const batch = await server.client.post('/v1/messages/batch', '{"messages":[{"room":"\\udc00","type":"t","data":1}]}');
  assert.match((batch.body as { results: { error?: { message: string } }[] }).results[0]?.error?.message ?? '', /^messages\/0\/room holds a lone surrogate \(\\udc00\)/, batch.text);
  // A type is ASCII: a whole character would not do either, so its rule is what is said.
  assert.match(refusal(await server.client.post('/v1/messages', '{"to":"ls","type":"t\\ud83d","data":1}')), /^body\/type must be 1–64 characters, each one of A-Z/);
});
