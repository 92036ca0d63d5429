/**
 * A producer request refused 401 is logged at warn, thinned like the outage lines
 * (src/log-throttle.ts: at most one per 10 s, with `notLogged`), naming the route and
 * that the API token did not match — never the token. Before, a node with another
 * PIXIU_API_TOKEN than the producers' answered them 401 with nothing in its log (a
 * black-box SRE's finding: 324 × 401, seen only in a metric).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN_REFUSED } from '../../src/api/app.js';
import { BAD_SIGNATURE, BAD_SIGNATURE_LOG } from '../../src/auth/jwt.js';
import { expectError } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';
import { cleanupList, startInProcessAlone } from '../harness/pixiu-server.js';
import { testToken } from '../harness/ws-client.js';
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
