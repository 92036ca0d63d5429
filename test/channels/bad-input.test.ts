/**
 * Bad channel input (DESIGN.md §6, §7): a publish to a malformed channel, or with a
 * malformed or oversized body, is a 400 (413) with the JSON error body and publishes
 * nothing; a malformed `sub` / `unsub` frame is answered with an `error` frame and
 * the connection stays healthy (it still answers `ping` and still receives).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { expectError, openInbox } from '../harness/checks.js';
import { fileRedis } from '../harness/file-redis.js';
import type { HttpAnswer } from '../harness/pixiu-server.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import { connectWith, expectErrorFrame, expectPub, publish, subscribe, waitTopics } from './channel-fixture.js';

let gw: GatewayFixture;
let probe: Redis;
const P = 'chb:';
/** The service's message size limit, small so the oversized case stays small. */
const MAX_MESSAGE_BYTES = 2048;

fileRedis(async ({ redis, cleanup }) => {
  gw = await startGateway(cleanup, { redisUrl: redis.url, redisPrefix: P, maxMessageBytes: String(MAX_MESSAGE_BYTES) });
  probe = (await openInbox(cleanup, redis.url)).redis;
});

/** The channel history keys under the service's prefix: a refused publish writes none. */
async function historyKeys(): Promise<string[]> {
  return (await probe.keys(`${P}ch:*`)).sort();
}

test('publishing to a malformed channel name is 400 and publishes nothing', async () => {
  const before = await historyKeys();
  const send = (path: string): Promise<HttpAnswer> => gw.client.post(`/v1/channels/${path}/publish`, { type: 't', data: 1 });
  const cases: Array<{ what: string; path: string }> = [
    { what: 'a * in the name', path: 'live.*.chat' },
    { what: 'a bare *', path: '*' },
    { what: 'a space', path: 'live%20chat' },
    { what: 'an empty segment', path: 'live..chat' },
    { what: 'a leading dot', path: '.live' },
    { what: 'a trailing dot', path: 'live.' },
    { what: 'a slash, encoded', path: 'a%2Fb' },
    { what: 'a brace', path: '%7Bx%7D' },
    { what: 'non-ASCII', path: encodeURIComponent('caf\u00e9') },
    { what: '129 characters', path: 'c'.repeat(129) },
    { what: 'an empty name', path: '' },
  ];
  for (const k of cases) {
    const answer = await send(k.path);
    try {
      expectError(answer, 400, 'INVALID_REQUEST', /channel/);
    } catch (err) {
      assert.fail(`${k.what}: ${(err as Error).message}`);
    }
  }
  assert.deepEqual(await historyKeys(), before, 'no history written');
  // 128 characters is the longest name, and fine.
  await publish(gw.client, 'c'.repeat(128), 1);
});

test('a malformed publish body is 400; an oversized one 413; nothing is published', async () => {
  const channel = 'body.checks';
  const client = await connectWith(gw, 'bodies', ['body.*']);
  await subscribe(client, channel);
  const path = `/v1/channels/${channel}/publish`;
  const cases: Array<{ what: string; body: unknown; status: number; code: string; message: RegExp }> = [
    { what: 'an unknown field', body: { type: 't', data: 1, to: 'x' }, status: 400, code: 'INVALID_REQUEST', message: /unknown field "to"/ },
    { what: 'no type', body: { data: 1 }, status: 400, code: 'INVALID_REQUEST', message: /type/ },
    { what: 'no data', body: { type: 't' }, status: 400, code: 'INVALID_REQUEST', message: /data/ },
    { what: 'a bad type', body: { type: 'has space', data: 1 }, status: 400, code: 'INVALID_REQUEST', message: /type/ },
    { what: 'not an object', body: [1, 2], status: 400, code: 'INVALID_REQUEST', message: /body/ },
    { what: 'not JSON', body: '{"type":', status: 400, code: 'INVALID_REQUEST', message: /JSON/i },
    {
      what: 'data over the message size limit', body: { type: 't', data: 'x'.repeat(MAX_MESSAGE_BYTES) },
      // The words docs/api.md's 413 row quotes for a channel publication.
      status: 413, code: 'PAYLOAD_TOO_LARGE',
      message: new RegExp(`^publication is ${Buffer.byteLength(JSON.stringify({ type: 't', data: 'x'.repeat(MAX_MESSAGE_BYTES) }))} bytes \\(the UTF-8 JSON of \\{type, data\\}\\), over the limit of ${MAX_MESSAGE_BYTES} bytes \\(PIXIU_MAX_MESSAGE_BYTES\\)$`),
    },
  ];
  for (const k of cases) {
    const answer = await gw.client.post(path, k.body);
    try {
      expectError(answer, k.status, k.code, k.message);
    } catch (err) {
      assert.fail(`${k.what}: ${(err as Error).message}`);
    }
  }
  // The subscriber got none of them: the next frame is this good publication.
  const id = await publish(gw.client, channel, 'x'.repeat(MAX_MESSAGE_BYTES - 100));
  await expectPub(client, channel, id, 'x'.repeat(MAX_MESSAGE_BYTES - 100));
  assert.equal(await probe.xlen(`${P}ch:{${channel}}:history`), 1);
});

test('publishing needs the API token', async () => {
  const answer = await gw.client.post('/v1/channels/open/publish', { type: 't', data: 1 }, { headers: { authorization: '' } });
  expectError(answer, 401, 'UNAUTHORIZED');
});

test('bad sub and unsub frames get an error frame; the connection stays healthy and still receives', async () => {
  const client = await connectWith(gw, 'framer', ['ok.*', '*']);
  const cases: Array<{ what: string; frame: object; message: RegExp; ref?: object }> = [
    { what: 'sub without channel', frame: { t: 'sub' }, message: /channel/ },
    { what: 'sub with an empty channel', frame: { t: 'sub', channel: '' }, message: /channel/ },
    { what: 'sub with a 300-char channel', frame: { t: 'sub', channel: 'x'.repeat(300) }, message: /needs channel: a string of 1-128 characters/ },
    { what: 'sub with a 129-char channel', frame: { t: 'sub', channel: 'x'.repeat(129) }, message: /1-128 characters/ },
    { what: 'sub with a 128-char channel of a bad character', frame: { t: 'sub', channel: `${'x'.repeat(127)} ` }, message: /not a channel name.*1-128/ },
    { what: 'sub with a numeric channel', frame: { t: 'sub', channel: 42 }, message: /channel/ },
    { what: 'sub with a bad since', frame: { t: 'sub', channel: 'ok.a', since: 'yesterday' }, message: /since/ },
    { what: 'sub with a numeric since', frame: { t: 'sub', channel: 'ok.a', since: 5 }, message: /since/ },
    { what: 'sub with an empty since', frame: { t: 'sub', channel: 'ok.a', since: '' }, message: /since/ },
    { what: 'sub with an unknown field', frame: { t: 'sub', channel: 'ok.a', from: 'x' }, message: /unknown field "from"/ },
    { what: 'unsub without channel', frame: { t: 'unsub' }, message: /channel/ },
    { what: 'unsub with a bad name', frame: { t: 'unsub', channel: 'a b' }, message: /not a channel name/ },
    { what: 'unsub with since', frame: { t: 'unsub', channel: 'ok.a', since: '1-0' }, message: /unknown field "since"/ },
    // Left out of `ref`: echoed, a lone surrogate makes a frame strict decoders refuse (the fidelity walk's F2).
    { what: 'sub with a lone surrogate', frame: { t: 'sub', channel: '\ud800' }, message: /not a channel name: "\\ud800"/, ref: { t: 'sub' } },
    { what: 'unsub with a lone surrogate', frame: { t: 'unsub', channel: 'a.\ud83d' }, message: /not a channel name: "a\.\\ud83d"/, ref: { t: 'unsub' } },
    { what: 'sub with a lone surrogate and an unknown field', frame: { t: 'sub', channel: '\udc00x', x: 1 }, message: /unknown field "x"/, ref: { t: 'sub' } },
  ];
  for (const k of cases) {
    client.send(k.frame);
    // Every refused sub or unsub is named in `ref`, its channel too when it is a string (one with a lone surrogate is not).
    const { t, channel } = k.frame as { t: string; channel?: unknown };
    const ref = k.ref ?? (typeof channel === 'string' ? { t, channel } : { t });
    try {
      const f = await expectErrorFrame(client, 'INVALID_REQUEST', k.message);
      assert.deepEqual(f.ref, ref);
    } catch (err) {
      assert.fail(`${k.what}: ${(err as Error).message}`);
    }
  }
  // A refused `sub … since` subscribed nothing.
  await waitTopics(probe, P, { 'ok.a': false });
  await subscribe(client, 'ok.a');
  const id = await publish(gw.client, 'ok.a', 'still here');
  await expectPub(client, 'ok.a', id, 'still here');
});

test('a malformed sub is INVALID_REQUEST also on a channel the token does not allow, and counts towards the bad-frame limit', async () => {
  const client = await connectWith(gw, 'narrow', ['ok.*']);
  // Well-formed but not allowed: FORBIDDEN, which does not count.
  client.send({ t: 'sub', channel: 'zz.a' });
  await expectErrorFrame(client, 'FORBIDDEN', /does not allow/);
  // A bad since is a malformed frame whatever the channel.
  client.send({ t: 'sub', channel: 'zz.a', since: 'not-an-id' });
  const f = await expectErrorFrame(client, 'INVALID_REQUEST', /since must be a publication id/);
  assert.deepEqual(f.ref, { t: 'sub', channel: 'zz.a' });
  // Twenty of them are tolerated (one is above); the next closes the connection 4003.
  for (let i = 1; i < 20; i++) client.send({ t: 'sub', channel: 'zz.a', since: 'not-an-id' });
  client.send({ t: 'sub', channel: 'zz.a', since: 'not-an-id' });
  assert.equal((await client.waitClose()).code, 4003);
});

test('a since out of the stream id range is INVALID_REQUEST naming the frame, never UNAVAILABLE', async () => {
  const client = await connectWith(gw, 'ranger', ['ok.*']);
  await publish(gw.client, 'ok.r', 'history');
  const cases: Array<{ what: string; since: string }> = [
    { what: 'a millisecond part over 2^64-1', since: '99999999999999999999-0' },
    { what: 'a sequence part over 2^64-1', since: '0-18446744073709551616' },
    { what: 'a millisecond part of 2^64', since: '18446744073709551616-0' },
    { what: 'both parts of 2^64', since: '18446744073709551616-18446744073709551616' },
  ];
  for (const k of cases) {
    client.send({ t: 'sub', channel: 'ok.r', since: k.since });
    const f = await client.next();
    assert.deepEqual(f, {
      t: 'error', code: 'INVALID_REQUEST', message: f.message, ref: { t: 'sub', channel: 'ok.r' },
    }, k.what);
    assert.match(String(f.message), /since/, k.what);
  }
  // Refused, also when Redis refused it after the node subscribed: nothing is followed.
  await waitTopics(probe, P, { 'ok.r': false });
  await subscribe(client, 'ok.r');
  const id = await publish(gw.client, 'ok.r', 'live');
  await expectPub(client, 'ok.r', id, 'live');
});


test('a refused sub of a channel already followed leaves it followed (docs/protocol.md: "follows nothing new")', async () => {
  const client = await connectWith(gw, 'kept-on-error', ['kept.*']);
  await subscribe(client, 'kept.c');
  const refused: Array<{ what: string; frame: object; message: RegExp }> = [
    { what: 'a malformed since', frame: { t: 'sub', channel: 'kept.c', since: 'bad' }, message: /since must be a publication id/ },
    { what: 'a since out of range', frame: { t: 'sub', channel: 'kept.c', since: '18446744073709551616-0' }, message: /since/ },
    { what: 'an unknown field', frame: { t: 'sub', channel: 'kept.c', bogus: 1 }, message: /unknown field "bogus"/ },
  ];
  for (const k of refused) {
    client.send(k.frame);
    const f = await expectErrorFrame(client, 'INVALID_REQUEST', k.message);
    assert.deepEqual(f.ref, { t: 'sub', channel: 'kept.c' }, k.what);
  }
  await waitTopics(probe, P, { 'kept.c': true });
  const id = await publish(gw.client, 'kept.c', 'still followed');
  await expectPub(client, 'kept.c', id, 'still followed');
});
