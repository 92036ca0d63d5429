/**
 * Which `msg` sends the machine marks `live` (src/delivery/effects.ts), the ones
 * `pixiu_delivery_lag_seconds` times: the first send on a connection of a seq appended
 * after its `welcome` or last `reset`, delivered from an offer (a local append) or a
 * pull (a notify). Not the backlog a connection joins on or is reset to (catch-up: its
 * lag is the device's time away), not a redelivery. The driver (machine-driver.ts)
 * records the marks and its checks (machine-checks.ts) fail any on another frame than
 * a first-sent `msg`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONFIG, Driver } from './machine-driver.js';

test('a msg is marked live on its first send of a seq appended while the connection was open; not the backlog it joined on or was reset to, not a redelivery', () => {
  const d = new Driver({ ...CONFIG, window: 10 });
  d.inbox.append(2);
  d.login('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['welcome 1', 'msg 1', 'msg 2']);
  assert.deepEqual(d.live, [], 'the backlog at its welcome is catch-up');

  // Seq 3 offered (a local append), seq 4 pulled after a notify (another node's append).
  d.offer();
  d.settle();
  d.notify(d.inbox.append());
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 3', 'msg 4']);
  assert.deepEqual(d.live, ['a 3', 'a 4']);

  // A redelivery round sends 1..4 again, marked: none is live.
  d.due('a');
  d.settle();
  assert.deepEqual(d.brief('a'), ['msg 1 r', 'msg 2 r', 'msg 3 r', 'msg 4 r']);
  assert.deepEqual(d.live, ['a 3', 'a 4']);

  // A second device joins now: 1..4 are its catch-up; seq 5 is live on both.
  d.login('b');
  d.settle();
  assert.deepEqual(d.brief('b'), ['welcome 1', 'msg 1', 'msg 2', 'msg 3', 'msg 4']);
  d.offer();
  d.settle();
  assert.deepEqual(d.live.slice(2).sort(), ['a 5', 'b 5']);
  for (const conn of ['a', 'b']) assert.deepEqual(d.brief(conn), ['msg 5'], conn);

  // The inbox is recreated with two messages: both connections are reset to them (catch-up), and seq 3 after is live.
  d.inbox.recreate('ep2');
  d.inbox.append(2);
  d.heartbeat();
  d.settle();
  for (const conn of ['a', 'b']) assert.deepEqual(d.brief(conn), ['reset ep2 2', 'msg 1', 'msg 2'], conn);
  assert.equal(d.live.length, 4);
  d.offer();
  d.settle();
  assert.deepEqual(d.live.slice(4).sort(), ['a 3', 'b 3']);
});
