/**
 * A producer request refused 401 is logged at warn, thinned like the outage lines
 * (src/log-throttle.ts: at most one per 10 s, with `notLogged`), naming the route and
 * that the API token did not match — never the token. Before, a node with another
 * PIXIU_API_TOKEN than the producers' answered them 401 with nothing in its log (a
 * black-box SRE's finding: 324 × 401, seen only in a metric). So is a client JWT the
 * node's key cannot verify (src/auth/jwt-refusals.ts): its signature, or its `alg`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN_REFUSED } from '../../src/api/app.js';
import { SignJWT, generateKeyPair } from 'jose';
import { BAD_SIGNATURE, BAD_SIGNATURE_LOG, KEY_REFUSED_LOG } from '../../src/auth/jwt-refusals.js';
import { expectError } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcessAlone } from '../harness/pixiu-server.js';
import { TestClient, testToken } from '../harness/ws-client.js';
import { expectRefused } from '../gateway/gateway-fixture.js';
import { exactly } from '../gateway/token-texts.js';

const WRONG = 'not-the-api-token-0123456789-secret';

test('a burst of 401s on producer routes is one warning naming the route; the next, 10 s on, carries how many were left out; the token is never logged', async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const { logger, lines } = capturingLogger();
  const { server } = await startInProcessAlone(files, { logLevel: 'info' }, logger);
  const refusedLines = (): typeof lines => lines.filter((l) => l.msg === API_TOKEN_REFUSED);
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  for (let i = 0; i < 20; i++) {
    const answer = await server.client.post('/v1/messages', { to: 'ann', type: 't', data: i }, { headers: { authorization: `Bearer ${WRONG}` } });
    assert.equal(answer.status, 401);
  }
  assert.equal(refusedLines().length, 1, JSON.stringify(refusedLines()));
  const [first] = refusedLines();
  assert.equal(first?.level, 40);
  assert.equal(first?.route, '/v1/messages');
  assert.equal(first?.method, 'POST');
  assert.equal(first?.reason, 'the bearer token sent is not this node\'s API token');
  assert.equal(first?.notLogged, undefined);
  t.mock.timers.tick(10_000);
  const history = await server.client.get('/v1/users/ann/messages', { headers: { authorization: '' } });
  assert.equal(history.status, 401);
  assert.equal(refusedLines().length, 2);
  const second = refusedLines()[1];
  assert.equal(second?.route, '/v1/users/:uid/messages');
  assert.equal(second?.reason, 'no Authorization: Bearer token was sent');
  assert.equal(second?.notLogged, 19);
  assert.ok(!JSON.stringify(lines).includes(WRONG));
  assert.ok(!JSON.stringify(lines).includes(server.service.secrets.apiToken));
});

test('a client JWT signed with another key is refused 401 saying so on /v1/me, and the node logs it at warn, thinned, without the token', async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const { logger, lines } = capturingLogger();
  const { server } = await startInProcessAlone(files, { logLevel: 'info' }, logger);
  const foreign = await testToken({ kind: 'secret', secret: 'another-data-dirs-jwt-secret-of-32-chars' }, 'ann');
  for (let i = 0; i < 3; i++) {
    const answer = await server.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${foreign}` } });
    expectError(answer, 401, 'UNAUTHORIZED', exactly(BAD_SIGNATURE));
  }
  const logged = lines.filter((l) => l.msg === BAD_SIGNATURE_LOG);
  assert.equal(logged.length, 1, JSON.stringify(lines.filter((l) => l.level >= 40)));
  assert.equal(logged[0]?.level, 40);
  assert.equal(logged[0]?.alg, 'HS256');
  assert.ok(!JSON.stringify(lines).includes(foreign.slice(foreign.lastIndexOf('.') + 1)), 'the token is never logged');
});

test('a client JWT of an alg the node\'s secret does not take (RS256, none) is refused 401 saying so on /v1/me and at the handshake, and logged at warn, thinned, with the reason, never the token', async (t) => {
  const files = cleanupList();
  t.after(() => files.run());
  const { logger, lines } = capturingLogger();
  const { server } = await startInProcessAlone(files, { logLevel: 'info' }, logger);
  const { privateKey } = await generateKeyPair('RS256');
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const rs256 = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: 'idp-key-1' }).setSubject('ann').setExpirationTime(exp).sign(privateKey);
  const unsigned = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'ann', exp })).toString('base64url')}.`;
  const takes = "(HS256: PIXIU_JWT_SECRET or the data dir's jwt-secret)";
  const rs256Refusal = `invalid token: its alg "RS256" is not one this node's key takes ${takes}`;
  const keyRefused = (): typeof lines => lines.filter((l) => l.msg === KEY_REFUSED_LOG);
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  for (let i = 0; i < 3; i++) {
    expectError(await server.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${rs256}` } }), 401, 'UNAUTHORIZED', exactly(rs256Refusal));
    await expectRefused(TestClient.connect(server.service.url, { token: rs256, params: { device: 'd' } }), 401, 'UNAUTHORIZED', exactly(rs256Refusal));
  }
  assert.equal(keyRefused().length, 1, JSON.stringify(lines.filter((l) => l.level >= 40)));
  const [first] = keyRefused();
  assert.equal(first?.level, 40);
  assert.equal(first?.reason, rs256Refusal);
  assert.equal(first?.alg, 'RS256');
  assert.equal(first?.kid, 'idp-key-1');
  assert.equal(first?.notLogged, undefined);
  t.mock.timers.tick(10_000);
  const noneRefusal = `invalid token: its alg "none" is not one this node's key takes ${takes}`;
  await expectRefused(TestClient.connect(server.service.url, { token: unsigned, params: { device: 'd' } }), 401, 'UNAUTHORIZED', exactly(noneRefusal));
  expectError(await server.client.get('/v1/me/messages', { headers: { authorization: `Bearer ${unsigned}` } }), 401, 'UNAUTHORIZED', exactly(noneRefusal));
  assert.equal(keyRefused().length, 2);
  assert.equal(keyRefused()[1]?.reason, noneRefusal);
  assert.equal(keyRefused()[1]?.notLogged, 5);
  // Neither is a bad signature: that line is the other warning's.
  assert.equal(lines.filter((l) => l.msg === BAD_SIGNATURE_LOG).length, 0);
  assert.ok(!JSON.stringify(lines).includes(rs256.slice(rs256.lastIndexOf('.') + 1)), 'the token is never logged');
});
