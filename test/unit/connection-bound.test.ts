/**
 * The default of `PIXIU_MAX_CONNECTIONS` (src/gateway/connection-bound.ts): read from the
 * soft limit in `/proc/self/limits`, less what the node's other files and its store's
 * LevelDB may need, never under half the limit; and the one line a start logs of it
 * (walk13 §4: past the open-files limit the kernel reset devices and producers alike).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BOUND_WITHOUT_LIMIT, HTTP_SHARE, connectionBound, defaultMaxConnections, openFilesLimit, ownOpenFilesLimit, socketBound } from '../../src/gateway/connection-bound.js';
import { loadConfig } from '../../src/config/config.js';
import { capturingLogger } from '../harness/log-capture.js';

/** A Linux `/proc/<pid>/limits`, as proc(5) lays it out. */
function limitsText(soft: string, hard: string): string {
  return [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max cpu time              unlimited            unlimited            seconds   ',
    'Max processes             96367                96367                processes ',
    `Max open files            ${soft.padEnd(21)}${hard.padEnd(21)}files     `,
    'Max locked memory         8388608              8388608              bytes     ',
    '',
  ].join('\n');
}

test('the soft limit of open files is read from /proc/<pid>/limits; unlimited or missing is unknown', () => {
  assert.equal(openFilesLimit(limitsText('256', '1048576')), 256);
  assert.equal(openFilesLimit(limitsText('1048576', '1048576')), 1_048_576);
  assert.equal(openFilesLimit(limitsText('unlimited', 'unlimited')), undefined);
  assert.equal(openFilesLimit('Max processes 100 100 processes\n'), undefined);
  assert.equal(openFilesLimit(''), undefined);
  // This process's, where there is one (Linux): a number the kernel gave it.
  const own = ownOpenFilesLimit();
  if (own !== undefined) assert.ok(Number.isInteger(own) && own > 0, String(own));
});

test('the default bound is the limit less 1024 and the store\'s files, never under half the limit, and fixed when the limit is unknown', () => {
  // 8 partitions: 40 files of their own, and up to 6,920 table files past LevelDB's 1,000
  // mapped ones, held to a fifth of the limit.
  assert.equal(defaultMaxConnections(1_048_576, 8), 1_048_576 - 1024 - 40 - 6920);
  assert.equal(defaultMaxConnections(65_536, 8), 65_536 - 1024 - 40 - 6920);
  assert.equal(defaultMaxConnections(20_000, 8), 20_000 - 1024 - 40 - 4000);
  // A small limit keeps half for the rest: walk13's `ulimit -n 256` node held ~63 files idle.
  assert.equal(defaultMaxConnections(256, 8), 128);
  assert.equal(defaultMaxConnections(4096, 8), 4096 - 1024 - 40 - 819);
  assert.equal(defaultMaxConnections(1, 8), 1);
  // One partition's tables all fit in the 1,000 mapped.
  assert.equal(defaultMaxConnections(65_536, 1), 65_536 - 1024 - 5);
  // More partitions, more files kept.
  assert.ok(defaultMaxConnections(65_536, 64) < defaultMaxConnections(65_536, 8));
  assert.equal(defaultMaxConnections(undefined, 8), BOUND_WITHOUT_LIMIT);
  // Within the setting's range however large the limit.
  assert.equal(defaultMaxConnections(1_073_741_816, 8), 10_000_000);
});

test('a start logs the bound once: derived with the limit, given, or given past the limit at warn', () => {
  const derived = capturingLogger();
  assert.deepEqual(connectionBound(loadConfig({}), derived.logger, () => 256), { webSockets: 128, sockets: 160 });
  assert.equal(derived.lines.length, 1);
  assert.deepEqual([derived.lines[0]?.level, derived.lines[0]?.maxConnections, derived.lines[0]?.maxSockets, derived.lines[0]?.openFilesLimit], [30, 128, 160, 256]);
  assert.match(String(derived.lines[0]?.msg), /PIXIU_MAX_CONNECTIONS unset: derived from the open-files limit/);

  const unknown = capturingLogger();
  assert.deepEqual(connectionBound(loadConfig({}), unknown.logger, () => undefined), { webSockets: BOUND_WITHOUT_LIMIT, sockets: BOUND_WITHOUT_LIMIT + HTTP_SHARE });
  assert.deepEqual([unknown.lines[0]?.maxConnections, unknown.lines[0]?.openFilesLimit], [BOUND_WITHOUT_LIMIT, null]);

  const given = capturingLogger();
  assert.deepEqual(connectionBound(loadConfig({ PIXIU_MAX_CONNECTIONS: '100' }), given.logger, () => 256), { webSockets: 100, sockets: 132 });
  assert.deepEqual([given.lines.length, given.lines[0]?.level, given.lines[0]?.maxConnections, given.lines[0]?.maxSockets], [1, 30, 100, 132]);

  const over = capturingLogger();
  assert.equal(connectionBound(loadConfig({}, { maxConnections: '5000' }), over.logger, () => 4096).webSockets, 5000);
  assert.deepEqual([over.lines.length, over.lines[0]?.level, over.lines[0]?.openFilesLimit], [1, 40, 4096]);
  assert.match(String(over.lines[0]?.msg), /at or over the open-files limit/);

  // Under the limit, but not with the room kept for HTTP connections: the kernel would
  // refuse sockets before the node does, so warned too.
  const near = capturingLogger();
  assert.deepEqual(connectionBound(loadConfig({}, { maxConnections: '4000' }), near.logger, () => 4096), { webSockets: 4000, sockets: 4512 });
  assert.deepEqual([near.lines.length, near.lines[0]?.level, near.lines[0]?.maxSockets], [1, 40, 4512]);
});

test('the bound on every socket is the WebSocket bound and room for HTTP connections: 512, or an eighth of a small open-files limit', () => {
  assert.equal(HTTP_SHARE, 512);
  assert.equal(socketBound(14_936, 20_000), 14_936 + 512);
  assert.equal(socketBound(3, 1_048_576), 3 + 512);
  // What the node keeps for its own files stays with it: 1024 - 640 = 384 of a limit of 1024.
  assert.equal(socketBound(defaultMaxConnections(1024, 8), 1024), 512 + 128);
  assert.equal(socketBound(128, 256), 160);
  assert.equal(socketBound(1, 1), 2, 'room for one handshake past the WebSocket bound, to be answered 503');
  assert.equal(socketBound(BOUND_WITHOUT_LIMIT, undefined), BOUND_WITHOUT_LIMIT + 512);
});
