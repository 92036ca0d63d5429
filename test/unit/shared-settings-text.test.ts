/**
 * The shared-settings mismatch warning (src/cluster/shared-settings-text.ts): one
 * consequence sentence per setting, and durations with their units. It said "(a lower
 * cap trims what the others keep)" of the connection limit and the channel history
 * TTL too, and showed a TTL as "3600 … but 86400000" (a black-box SRE's finding).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SHARED_SETTINGS } from '../../src/cluster/shared-settings.js';
import { SETTING_EFFECTS, settingMismatchLine, shownValue } from '../../src/cluster/shared-settings-text.js';

test('a channel history TTL mismatch shows both durations with units and says what the TTL does, not that a cap trims', () => {
  const line = settingMismatchLine({ setting: 'channelHistoryTtlMs', env: 'PIXIU_CHANNEL_HISTORY_TTL', here: 3600, there: 86_400_000, nodes: ['node-a'] });
  assert.equal(line, 'PIXIU_CHANNEL_HISTORY_TTL is 3600ms on this node but 1d on node node-a: '
    + 'each node sets a channel\'s history to expire its own TTL after every publication it makes, so a history lives as long as the TTL of the node that published last; '
    + 'give every node the same (docs/decisions.md, "Several nodes")');
});

test('a connection limit mismatch says one node refuses (429) what another accepts, with no cap or trim', () => {
  const line = settingMismatchLine({ setting: 'maxConnectionsPerUser', env: 'PIXIU_MAX_CONNECTIONS_PER_USER', here: 3, there: 5, nodes: ['node-a', 'node-b'] });
  assert.match(line, /^PIXIU_MAX_CONNECTIONS_PER_USER is 3 on this node but 5 on nodes node-a, node-b: each node counts a user's connections on every node against its own limit when a device connects, so one node refuses \(429\) a connection another accepts; give every node the same/);
  assert.doesNotMatch(line, /trim/);
});

test('an inbox cap mismatch says the lowest cap trims for every node; every shared setting has its own sentence', () => {
  assert.match(settingMismatchLine({ setting: 'inboxCap', env: 'PIXIU_INBOX_CAP', here: 20_000, there: 10_000, nodes: ['n'] }),
    /^PIXIU_INBOX_CAP is 20000 on this node but 10000 on node n: each node trims a user's inbox to its own cap at every append, so the lowest cap wins/);
  assert.deepEqual(Object.keys(SETTING_EFFECTS).sort(), [...SHARED_SETTINGS].sort());
  assert.equal(new Set(Object.values(SETTING_EFFECTS)).size, SHARED_SETTINGS.length);
  assert.equal(shownValue('channelHistoryTtlMs', 90_000), '90s');
  assert.equal(shownValue('channelHistoryTtlMs', 1500), '1500ms');
  assert.equal(shownValue('inboxCap', 86_400_000), '86400000');
});
