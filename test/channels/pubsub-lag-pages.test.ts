/**
 * docs/protocol.md ("Channels", `since`), as pubsub-lag.test.ts, across catch-up pages:
 * a catch-up of more than one page (100 publications) whose second page is read after
 * publications made during the catch-up filled the history past them. The page reaches
 * beyond the newest id read after the join; sent from it, those entries made the live
 * copies still on their way on the subscriber connection look already sent, and the
 * ones the history had trimmed were lost without a signal. Only the history up to that
 * id comes from the catch-up; the rest comes live.
 *
 * The lag is simulated in-process: the node's `message` events for the test channel's
 * topic are held while the catch-up runs and handed over, in order, once it is over
 * (the `sub` holds back the connection's next frame until then: a `ping` answered).
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { publish } from './channel-fixture.js';
import { connectViewer, pausableGatewayForFile, pauseThenCatchUp } from './paused-catch-up.js';

/** Kept per channel: more than one catch-up page (100), fewer than what is published during the catch-up. */
const HISTORY = 103;
const gateway = pausableGatewayForFile({ history: HISTORY });
const TOPIC = 'px:ch:c.x';
let holding = false;
const held: Array<{ client: Redis; args: unknown[] }> = [];

const emit = Redis.prototype.emit;
Redis.prototype.emit = function (this: Redis, event: string | symbol, ...args: unknown[]): boolean {
  if (holding && event === 'message' && args[0] === TOPIC) {
    held.push({ client: this, args });
    return true;
  }
  return emit.call(this, event, ...args);
} as typeof Redis.prototype.emit;

after(() => { Redis.prototype.emit = emit; });

const named = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);

test('publications made during a two-page catch-up, trimmed from the history before its second page, all arrive live', { timeout: 60_000 }, async () => {
  const p = gateway();
  const { gw } = p;
  const client = await connectViewer(p);
  const history = named('h', 101);
  for (const h of history) await publish(gw.client, 'c.x', h);
  // The first page (h1..h100) is read and h1 written; the connection is paused.
  await pauseThenCatchUp(p, client);
  // Published after the sub took effect, their live copies held back; the history keeps the newest 103 of them.
  holding = true;
  const live = named('p', HISTORY + 7);
  for (const x of live) await publish(gw.client, 'c.x', x);
  client.ws.resume();
  client.send({ t: 'ping' });
  const got: string[] = [];
  for (;;) {
    const f = await client.next(20_000);
    if (f.t === 'pong') break;
    if (f.t === 'pub' && f.channel === 'c.x') got.push(f.data as string);
  }
  holding = false;
  for (const { client: c, args } of held.splice(0)) emit.call(c, 'message', ...args);
  const marker = await publish(gw.client, 'c.x', 'marker');
  for (;;) {
    const f = await client.next(20_000);
    if (f.t !== 'pub' || f.channel !== 'c.x') continue;
    got.push(f.data as string);
    if (f.id === marker) break;
  }
  // The history up to where the second page begins (h1..h100 with pages of 100), then
  // every live publication. The rest of the history, trimmed before the second page was
  // read, is gone (at-most-once).
  const firstLive = got.indexOf('p1');
  assert.ok(firstLive >= 1, `no live p1 after some history: ${JSON.stringify(got.slice(0, 3))}…`);
  assert.deepEqual(got.slice(0, firstLive), history.slice(0, firstLive), 'a prefix of the history, in order');
  assert.deepEqual(got.slice(firstLive), [...live, 'marker']);
});
