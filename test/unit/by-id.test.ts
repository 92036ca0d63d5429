/**
 * ById (src/delivery/by-id.ts): a user's connections by id, one held in a field, more
 * in a Map. What it answers (size, lookups, the order of iteration) must be a Map's,
 * whichever it holds, through adds and removals in any order.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ById } from '../../src/delivery/by-id.js';

interface Item {
  readonly id: string;
  readonly n: number;
}

/** Asserts that `table` answers as `model` does. */
function assertLike(table: ById<Item>, model: Map<string, Item>, ids: readonly string[]): void {
  assert.equal(table.size, model.size);
  assert.deepEqual([...table], [...model.values()]);
  for (const id of ids) assert.equal(table.get(id), model.get(id), `get(${id})`);
}

test('one item, then several, then one again: answered as a Map answers, in the order added', () => {
  const table = new ById<Item>();
  const model = new Map<string, Item>();
  const ids = ['a', 'b', 'c', 'x'];
  const set = (item: Item): void => {
    table.set(item);
    model.set(item.id, item);
    assertLike(table, model, ids);
  };
  const del = (id: string): void => {
    assert.equal(table.delete(id), model.delete(id), `delete(${id})`);
    assertLike(table, model, ids);
  };
  assertLike(table, model, ids);
  del('a'); // nothing there
  set({ id: 'a', n: 1 });
  del('x'); // not that one
  set({ id: 'a', n: 2 }); // replaced in place: still one
  set({ id: 'b', n: 3 }); // the second: a Map, a first
  set({ id: 'c', n: 4 });
  set({ id: 'b', n: 5 }); // replaced in its place, between a and c
  del('a');
  del('x');
  del('c'); // back to one: b
  set({ id: 'a', n: 6 }); // after b
  del('b');
  del('a');
  del('a');
  set({ id: 'c', n: 7 });
});

test('random adds and removals over a few ids answer as a Map does at every step', () => {
  let seed = 7;
  const random = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const ids = ['a', 'b', 'c', 'd'];
  const table = new ById<Item>();
  const model = new Map<string, Item>();
  for (let step = 0; step < 2000; step++) {
    const id = ids[random(ids.length)] as string;
    if (random(2) === 0) {
      const item = { id, n: step };
      table.set(item);
      model.set(id, item);
    } else {
      assert.equal(table.delete(id), model.delete(id));
    }
    assertLike(table, model, ids);
  }
});
