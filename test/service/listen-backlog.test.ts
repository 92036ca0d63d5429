/**
 * The listen backlog (`PIXIU_LISTEN_BACKLOG`, docs/decisions.md "Listen backlog"): the
 * value reaches the listening socket, read back as the kernel reports it — `ss` shows a
 * listening TCP socket's backlog as its Send-Q — and the default is 4096, not Node's 511.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadConfig } from '../../src/config/config.js';
import { startInProcessAlone } from '../harness/pixiu-server.js';

/** The backlog of the TCP socket listening on 127.0.0.1:`port`, as `ss -ltn` reports it (its Send-Q). */
function listenBacklogOf(port: number): number {
  const out = execFileSync('ss', ['-H', '-l', '-t', '-n', `sport = :${port}`], { encoding: 'utf8' });
  const line = out.split('\n').find((l) => l.includes(`127.0.0.1:${port}`));
  assert.ok(line !== undefined, `no listening socket on port ${port} in: ${out}`);
  const [state, , sendQ] = line.trim().split(/\s+/);
  assert.equal(state, 'LISTEN', line);
  return Number(sendQ);
}

test('the node listens with PIXIU_LISTEN_BACKLOG as its backlog, 4096 by default', async (t) => {
  assert.equal(loadConfig({}, {}).listenBacklog, 4096);
  assert.equal(loadConfig({ PIXIU_LISTEN_BACKLOG: '1000' }, {}).listenBacklog, 1000);
  // Under the kernel's cap, so the kernel keeps it as given.
  const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
  const backlog = Math.min(1000, somaxconn);
  const { server } = await startInProcessAlone(t, { listenBacklog: String(backlog) });
  const port = Number(new URL(server.service.url).port);
  assert.equal(listenBacklogOf(port), backlog);
});
