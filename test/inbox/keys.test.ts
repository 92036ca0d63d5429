import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isPixiuError } from '../../src/errors.js';
import { DEFAULT_PREFIX, Keys, MAX_UID_LENGTH } from '../../src/redis/keys.js';

/** The hash tag Redis Cluster hashes: between the first `{` and the next `}`. */
function hashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : undefined;
}

test('a user\'s keys are <prefix>{uid}:<role> and share the uid as their hash tag', () => {
  const keys = new Keys();
  assert.equal(keys.prefix, DEFAULT_PREFIX);
  assert.deepEqual(keys.user('alice').toJSON(), {
    inbox: 'px:{alice}:inbox',
    meta: 'px:{alice}:meta',
    acks: 'px:{alice}:acks',
    ids: 'px:{alice}:ids',
    conns: 'px:{alice}:conns',
  });
  const all = keys.user('u:42/x').toJSON();
  for (const key of Object.values(all)) assert.equal(hashTag(key), 'u:42/x', key);
  assert.deepEqual([keys.inbox('a'), keys.meta('a'), keys.acks('a'), keys.ids('a'), keys.conns('a')], Object.values(keys.user('a').toJSON()));
  assert.equal(new Keys('t1:').inbox('bob'), 't1:{bob}:inbox');
});

test('braces and % in a uid are escaped in its hash tag: one slot per user, no two users share keys', () => {
  const keys = new Keys();
  const uids = ['}x', 'a{b', 'a}b', '{}', '%7D', '%', 'a%7Bb', 'a{b}'];
  const seen = new Map<string, string>();
  for (const uid of uids) {
    const all = Object.values(keys.user(uid).toJSON());
    const tag = hashTag(all[0] ?? '');
    assert.ok(tag !== undefined && tag.length > 0, `non-empty tag for ${uid}`);
    for (const key of all) assert.equal(hashTag(key), tag, key);
    assert.ok(!seen.has(all[0] ?? ''), `${uid} collides with ${seen.get(all[0] ?? '')}`);
    seen.set(all[0] ?? '', uid);
  }
  assert.equal(keys.inbox('a}b'), 'px:{a%7Db}:inbox');
});

test('uids and prefixes that would break the one-slot rule are INVALID_REQUEST', () => {
  const keys = new Keys();
  for (const uid of ['', 'x'.repeat(MAX_UID_LENGTH + 1)]) {
    assert.throws(() => keys.user(uid), (err) => isPixiuError(err, 'INVALID_REQUEST'), JSON.stringify(uid));
  }
  assert.equal(keys.user('x'.repeat(MAX_UID_LENGTH)).inbox.length, MAX_UID_LENGTH + 'px:{}:inbox'.length);
  for (const prefix of ['', 'a{', 'a b', 'x'.repeat(33)]) {
    assert.throws(() => new Keys(prefix), (err) => isPixiuError(err, 'INVALID_REQUEST'), JSON.stringify(prefix));
  }
});
