/**
 * A request asking for a protocol upgrade (`Connection: Upgrade`, e.g. h2c) cannot have
 * a body: Node does not read it (src/gateway/upgrade-guard.ts). A body is announced by
 * `Transfer-Encoding` or by a `Content-Length` other than 0; either is refused 400 for
 * what it is. `Content-Length: 0` announces none, and the request is answered as usual.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rawRequest, type RawAnswer } from '../harness/raw-http.js';
import { fileRedis } from '../harness/file-redis.js';
import { startGateway, type GatewayFixture } from './gateway-fixture.js';

let gw: GatewayFixture;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url });
});

/** Sends `request` to the gateway on a raw socket (`fetch` sends no Upgrade header). */
function raw(request: string): Promise<RawAnswer> {
  return rawRequest(gw.url, request);
}

const UPGRADE = 'Upgrade: h2c\r\nConnection: Upgrade\r\n';

test('an upgrade request with Content-Length: 0 announces no body and is answered as usual', async () => {
  const answer = await raw(`GET /healthz HTTP/1.1\r\nHost: x\r\n${UPGRADE}Content-Length: 0\r\n\r\n`);
  assert.equal(answer.status, 200, answer.text);
});

test('an upgrade request with a chunked body is refused 400 for its body', async () => {
  const answer = await raw(`GET /healthz HTTP/1.1\r\nHost: x\r\n${UPGRADE}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`);
  assert.equal(answer.status, 400, answer.text);
  const { error } = answer.body as { error: { code: string; message: string } };
  assert.equal(error.code, 'INVALID_REQUEST');
  assert.match(error.message, /a request with a body cannot ask for a protocol upgrade/);
});
