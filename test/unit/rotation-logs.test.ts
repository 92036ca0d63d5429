/**
 * The warning of a rotation a device's `last_seq` asked for (src/delivery/rotation-logs.ts)
 * names `pixiu redis lost-writes`: an SRE who forgot it after an unplanned failover saw
 * this line for the users whose devices came back early, while other users' acknowledged
 * messages were lost silently, and nothing suggested the command (redisops2 R2).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logRotation } from '../../src/delivery/rotation-logs.js';
import { capturingLogger } from '../harness/log-capture.js';

test('a resume above the inbox\'s latest warns and names pixiu redis lost-writes', () => {
  const { logger, lines } = capturingLogger();
  logRotation({ logger }, { user: 'u1', epoch: 'old', newEpoch: 'new' }, 'resume');
  assert.equal(lines.length, 1);
  assert.equal(lines[0]?.level, 40);
  assert.match(String(lines[0]?.msg), /^a device resumed from a last_seq above the inbox's latest under its epoch: .*After an unplanned failover or a restore, run pixiu redis lost-writes against the new primary/);
});
