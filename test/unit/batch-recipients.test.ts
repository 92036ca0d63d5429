/**
 * A batch's recipients against the node's budget (src/api/routes/batch-items.ts
 * `BatchRecipients`, `RecipientBudget`): when the budget refuses a batch, its items are
 * checked for refusals of their own only until the good ones are sure not to fit (the
 * batch is then 503 whatever the rest hold, and each check encodes an item's data); an
 * item admitted late (a `client_msg_id` repeated across kinds) that is refused for
 * itself gets its own error whatever the load, as the others do.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PixiuError } from '../../src/errors.js';
import { BatchRecipients, type MessageBody } from '../../src/api/routes/batch-items.js';
import { InProgressBudget as RecipientBudget } from '../../src/api/routes/ingest-budget.js';

const tooLarge = (item: MessageBody): void => {
  if (item.data === 'big') throw new PixiuError('PAYLOAD_TOO_LARGE', 'message is 70000 bytes (the UTF-8 JSON of {type, data}), over the limit');
};
const oneEach = (): number => 1;

test('a batch the budget refuses has its items checked only until its good ones reach more than the budget has left: then 503, the rest unchecked', () => {
  const budget = new RecipientBudget(20);
  budget.take(15);
  assert.equal(budget.free, 5);
  const items: MessageBody[] = Array.from({ length: 10 }, (_, i) => ({ to: `u${i}`, type: 't', data: i }));
  const checked: number[] = [];
  assert.throws(
    () => new BatchRecipients(budget, 10, { items, recipients: 10, recipientsOf: oneEach }, new Set(), (item) => { checked.push(item.data as number); }),
    (err: PixiuError) => err.code === 'UNAVAILABLE',
  );
  assert.deepEqual(checked, [0, 1, 2, 3, 4, 5], 'the sixth good item is past the 5 left: nothing after it is checked');
  assert.equal(budget.free, 5, 'nothing taken');
});

test('a batch the budget refuses is taken once its items refused for themselves are left out, when the rest fits', () => {
  const budget = new RecipientBudget(20);
  budget.take(15);
  const items: (MessageBody | PixiuError)[] = [
    { to: 'a', type: 't', data: 'big' }, { to: 'b', type: 't', data: 1 }, { to: 'c', type: 't', data: 'big' }, { to: 'd', type: 't', data: 2 },
  ];
  // Two recipients each: 8 do not fit beside the 15 in progress, the good items' 4 do.
  const recipients = new BatchRecipients(budget, 10, { items, recipients: 8, recipientsOf: () => 2 }, new Set(), tooLarge);
  assert.deepEqual(items.map((c) => (c instanceof PixiuError ? c.message.slice(0, 11) : c.to)), ['messages/0:', 'b', 'messages/2:', 'd']);
  assert.equal(budget.free, 1);
  recipients.release();
  assert.equal(budget.free, 5);
});

test('an item admitted late that is over the size limit is 413 when the budget is full, as without load, not 503', () => {
  const budget = new RecipientBudget(20);
  budget.take(15);
  // Item 1 repeats item 0's key across kinds: uncounted, admitted once item 0 is refused.
  const items: MessageBody[] = [{ room: 'gone', type: 't', data: 1, client_msg_id: 'k' }, { to: 'a', type: 't', data: 'big', client_msg_id: 'k' }];
  const recipients = new BatchRecipients(budget, 10, { items, recipients: 0, recipientsOf: oneEach }, new Set([1]), tooLarge);
  budget.take(5);
  const refused = recipients.admitLate(1, items[1] as MessageBody);
  assert.equal(refused?.code, 'PAYLOAD_TOO_LARGE');
  assert.match(refused?.message ?? '', /^messages\/1: message is/);
  assert.equal(recipients.admitLate(1, { to: 'a', type: 't', data: 1 })?.code, 'UNAVAILABLE', 'a good one is refused for the load');
});
