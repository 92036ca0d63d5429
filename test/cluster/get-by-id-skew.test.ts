/**
 * `GET /v1/messages/{id}` judges expiry as history does on the node asked (docs/api.md
 * "Messages"): a message is readable there while neither the reading node's clock nor
 * the storing node's says it has expired. Two `pixiu serve` nodes on one Redis, B's
 * clock {@link SKEW_MS} ahead of A's and Redis's (test/harness/clock-offset.mjs), a
 * message of a shorter `ttl` stored through A: by B's clock it expired at once. Before,
 * history via the node ahead gave it as an `expired` gap while `GET /v1/messages/{id}`
 * there answered 200 with an `expires_at` in the past (the walk31 tester's F5, with the
 * storing node 10 minutes behind; a node behind now counts a message's ttl from Redis's
 * clock when that is later — docs/decisions.md, clock skew — so the reader ahead is the
 * case left).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitUntil } from '../harness/checks.js';
import { cleanupList, type PixiuClient } from '../harness/pixiu-server.js';
import { skewedNodes } from '../harness/skewed-nodes.js';

const TOKEN = 'get-by-id-skew-token-0123456789';
/** How far node B's clock runs ahead of A's (and Redis's), ms. */
const SKEW_MS = 20_000;
/** The short message's ttl, s: shorter than the skew, so by B's clock it has expired when stored. */
const TTL_S = 10;

test('a message another node stored, expired by the reading node\'s clock, is 404 by id there, as history gives it expired', { timeout: 60_000 }, async (t) => {
  const c = cleanupList();
  t.after(() => c.run());
  // Node A (this machine's clock) and node B (its clock SKEW_MS ahead).
  const { a, b } = await skewedNodes(c, TOKEN, SKEW_MS);
  // A control of a long ttl: B reads A's store once it has seen it (read every 5 s).
  const long = await a.post('/v1/messages', { to: 'u1', type: 't', data: { n: 1 }, ttl: 3600 });
  assert.equal(long.status, 201, long.text);
  const longId = (long.body as { id: string }).id;
  await waitUntil('B reads A\'s store', async () => (await b.get(`/v1/messages/${longId}`)).status === 200, 15_000, 200);

  const short = await a.post('/v1/messages', { to: 'u1', type: 't', data: { n: 2 }, ttl: TTL_S });
  assert.equal(short.status, 201, short.text);
  const shortId = (short.body as { id: string }).id;

  /** A's or B's history of u1: its messages' ids and its gaps. */
  const historyVia = async (node: PixiuClient): Promise<{ ids: string[]; gaps: unknown }> => {
    const page = (await node.get('/v1/users/u1/messages')).body as { messages: { id: string }[]; gaps: unknown };
    return { ids: page.messages.map((m) => m.id), gaps: page.gaps };
  };
  assert.deepEqual(await historyVia(b), { ids: [longId], gaps: [{ from: 2, to: 2, reason: 'expired' }] }, 'history via B: the short one is an expired gap');
  const viaB = await b.get(`/v1/messages/${shortId}`);
  assert.equal(viaB.status, 404, `GET via B agrees with B's history: ${viaB.text}`);
  assert.match(viaB.text, /\(never stored, or expired\)/);
  // Via A, by whose clock it has seconds left, it is readable, as in A's history.
  assert.deepEqual(await historyVia(a), { ids: [longId, shortId], gaps: [] }, 'history via A: both');
  const viaA = await a.get(`/v1/messages/${shortId}`);
  assert.equal(viaA.status, 200, viaA.text);
});
