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
    closed: 'px:{alice}:closed',
    replaced: 'px:{alice}:replaced',
  });
  const all = keys.user('u:42/x').toJSON();
  for (const key of Object.values(all)) assert.equal(hashTag(key), 'u:42/x', key);
  assert.deepEqual([keys.inbox('a'), keys.meta('a'), keys.acks('a'), keys.ids('a'), keys.conns('a'), keys.closed('a'), keys.replaced('a')], Object.values(keys.user('a').toJSON()));
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

test('the shared keys keep their names (they outlive a release: a renamed key is data lost), the store keys share the {store} slot, and rooms, channels and client_msg_ids get an escaped, checked hash tag', () => {
  const keys = new Keys('t:');
  assert.deepEqual({
    nodes: keys.nodes(),
    nodeSettings: keys.nodeSettings(),
    nodeChannel: keys.nodeChannel('n1'),
    broadcast: keys.broadcast(),
    roomMembers: keys.roomMembers('r{1}'),
    roomCut: keys.roomCut('r{1}'),
    roomTop: keys.roomTop('r{1}'),
    channelHistory: keys.channelHistory('c.x}'),
    channelTopic: keys.channelTopic('c.x'),
    storePartitions: keys.storePartitions(),
    storeDescriptions: keys.storeDescriptions(),
    storeMinted: keys.storeMinted('s1'),
    claimsSince: keys.claimsSince(),
    storeLease: keys.storeLease('s1'),
    clientIdClaim: keys.clientIdClaim('m%1'),
    readinessProbe: keys.readinessProbe(),
    clusterSecret: keys.clusterSecret(),
  }, {
    nodes: 't:nodes',
    nodeSettings: 't:node-settings',
    nodeChannel: 't:node:n1',
    broadcast: 't:broadcast',
    roomMembers: 't:room:{r%7B1%7D}:members',
    roomCut: 't:room:{r%7B1%7D}:cut',
    roomTop: 't:room:{r%7B1%7D}:top',
    channelHistory: 't:ch:{c.x%7D}:history',
    channelTopic: 't:ch:c.x',
    storePartitions: 't:xiu:{store}:partitions',
    storeDescriptions: 't:xiu:{store}:stores',
    storeMinted: 't:xiu:{store}:minted:s1',
    claimsSince: 't:xiu:{store}:claims-since',
    storeLease: 't:xiu:{store}:lease:s1',
    clientIdClaim: 't:cmid:{m%251}',
    readinessProbe: 't:readyz',
    clusterSecret: 't:cluster:secret',
  });
  assert.equal(keys.inbox('a{b}'), 't:{a%7Bb%7D}:inbox', 'every brace escaped, not only the first');
  for (const build of [(id: string) => keys.roomMembers(id), (id: string) => keys.roomCut(id), (id: string) => keys.roomTop(id), (id: string) => keys.channelHistory(id), (id: string) => keys.clientIdClaim(id)]) {
    for (const id of ['', 'x'.repeat(MAX_UID_LENGTH + 1)]) {
      assert.throws(() => build(id), (err) => isPixiuError(err, 'INVALID_REQUEST'), `${build.toString()} ${id.length}`);
    }
  }
  assert.throws(() => new Keys('a}'), (err) => isPixiuError(err, 'INVALID_REQUEST'), 'a closing brace in the prefix');
});
