/**
 * A handshake refused 429 for the user's connection limit (`PIXIU_MAX_CONNECTIONS_PER_USER`)
 * is logged at info, thinned like the Origin refusal (one line per 10 s): a browser page
 * sees only a socket closing 1006 and shows "connection failing", and the node logged
 * the cause at debug only (a browser tester's finding: a sixth tab).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CONNECTION_LIMIT_LINE } from '../../src/gateway/handshake-refusals.js';
import { capturingLogger, type LogLine } from '../harness/log-capture.js';
import { cleanupList } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { expectRefused, startGateway, type GatewayFixture } from './gateway-fixture.js';

const cleanup = cleanupList();
let gw: GatewayFixture;
let lines: LogLine[];

before(async () => {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const captured = capturingLogger();
  lines = captured.lines;
  gw = await startGateway(cleanup, { redisUrl: redis.url, maxConnectionsPerUser: '2' }, captured.logger);
});

after(() => cleanup.run());

test('a handshake over the user\'s connection limit is refused 429 naming the setting and what frees a place, and logged at info with the user, device and limit; the next within 10 s is left out', async () => {
  await gw.connectWelcomed('tabs', { device: 'tab1' });
  await gw.connectWelcomed('tabs', { device: 'tab2' });
  await expectRefused(gw.connect('tabs', { device: 'tab3' }), 429, 'RATE_LIMITED', /^user tabs already has 2 connections, on all nodes \(PIXIU_MAX_CONNECTIONS_PER_USER\); wait for one to close, or DELETE \/v1\/users\/\{uid\}\/connections frees them at once$/);
  await expectRefused(gw.connect('tabs', { device: 'tab4' }), 429, 'RATE_LIMITED');
  const logged = lines.filter((l) => l.msg === CONNECTION_LIMIT_LINE);
  assert.deepEqual(logged.map((l) => [l.level, l.user, l.device, l.limit, l.notLogged]), [[30, 'tabs', 'tab3', 2, undefined]]);
  assert.equal(CONNECTION_LIMIT_LINE, 'websocket handshake refused: the user has PIXIU_MAX_CONNECTIONS_PER_USER connections already');
});
