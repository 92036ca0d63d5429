/**
 * `pixiu connect` on a connection that goes silent (docs/protocol.md, "Detecting a
 * dead connection"; src/cli/silence-watch.ts): through a TCP proxy in the test that
 * stops forwarding both ways with no FIN or RST (a half-open link: Wi-Fi changed, a NAT
 * mapping dropped), the command says so and drops the connection once nothing has come
 * for twice the heartbeat — `closed 1006`, exit 1, the `{"last_seq", "epoch"}` line —
 * where it used to wait until killed (the network-fault tester's F2). The server's
 * heartbeat is 1 s here (welcome says `heartbeat: 1`), so twice it is 2 s. A connection
 * whose uplink alone is held, while the server's pings still come, is kept.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawnCli, type CliProcess } from '../harness/cli-process.js';
import { cleanupList, startInProcessAlone, type CleanupContext, type InProcessServer } from '../harness/pixiu-server.js';

const JWT_SECRET = 'cli-connect-silence-hs256-secret-of-32-chars';

let server: InProcessServer;
const files = cleanupList();

before(async () => {
  ({ server } = await startInProcessAlone(files, { jwtSecret: JWT_SECRET, heartbeatMs: '1000' }));
});

after(() => files.run());

/** One client connection through the proxy, and what the test can do to it. */
interface ProxiedLink {
  /** Stops forwarding both ways: bytes are read and dropped, no FIN or RST is passed on. */
  blackhole(): void;
  /** Stops reading from the client (its bytes wait in the kernel) until {@link release}. */
  holdUplink(): void;
  release(): void;
  /** WebSocket ping frames forwarded from the server so far. */
  readonly serverPings: number;
}

/**
 * A TCP proxy to `target` on a free port: every connection is forwarded both ways until
 * the test acts on it. Its links are listed in connection order.
 */
async function startProxy(t: CleanupContext, target: URL): Promise<{ url: string; links: ProxiedLink[] }> {
  const links: ProxiedLink[] = [];
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
    }
    let holed = false;
    let pings = 0;
    let fromServer = Buffer.alloc(0);
    let upgraded = false;
    client.on('data', (chunk: Buffer) => { if (!holed) upstream.write(chunk); });
    upstream.on('data', (chunk: Buffer) => {
      if (holed) return;
      client.write(chunk);
      // Counts the server's ping frames (opcode 9; server frames are not masked, RFC 6455 §5.1).
      fromServer = Buffer.concat([fromServer, chunk]);
      if (!upgraded) {
        const end = fromServer.indexOf('\r\n\r\n');
        if (end < 0) return;
        upgraded = true;
        fromServer = fromServer.subarray(end + 4);
      }
      for (;;) {
        if (fromServer.length < 2) break;
        let len = (fromServer[1] as number) & 0x7f;
        let head = 2;
        if (len === 126) [len, head] = [fromServer.length >= 4 ? fromServer.readUInt16BE(2) : Infinity, 4];
        else if (len === 127) [len, head] = [fromServer.length >= 10 ? Number(fromServer.readBigUInt64BE(2)) : Infinity, 10];
        if (fromServer.length < head + len) break;
        if (((fromServer[0] as number) & 0x0f) === 9) pings += 1;
        fromServer = fromServer.subarray(head + len);
      }
    });
    // A close is passed on, unless the link is a blackhole.
    client.on('end', () => { if (!holed) upstream.end(); });
    upstream.on('end', () => { if (!holed) client.end(); });
    links.push({
      blackhole: () => { holed = true; },
      holdUplink: () => client.pause(),
      release: () => client.resume(),
      get serverPings() { return pings; },
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => proxy.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`, links };
}

/** Posts one message to `user`; resolves with its seq. */
async function post(user: string): Promise<number> {
  const answer = await server.client.post('/v1/messages', { to: user, type: 'note', data: {} });
  assert.equal(answer.status, 201, answer.text);
  return (answer.body as { recipients: Array<{ seq: number }> }).recipients[0]?.seq as number;
}

/** Starts `pixiu connect <user>` through `url` and waits for its welcome and the msg lines of `seqs`. */
async function connected(t: CleanupContext, user: string, url: string, seqs: number[]): Promise<{ connect: CliProcess; epoch: unknown }> {
  const connect = spawnCli(['connect', user, '--device', 'laptop', '--url', url], { PIXIU_JWT_SECRET: JWT_SECRET }, t);
  const welcome = JSON.parse(await connect.line((l) => l.startsWith('{"t":"welcome"'), 'the welcome frame')) as { heartbeat: number; epoch: unknown };
  assert.equal(welcome.heartbeat, 1);
  for (const seq of seqs) await connect.line((l) => l.startsWith('{"t":"msg"') && (JSON.parse(l) as { seq: number }).seq === seq, `msg ${seq}`);
  return { connect, epoch: welcome.epoch };
}

test('pixiu connect drops a connection gone silent (blackholed both ways) after twice the heartbeat: closed 1006, exit 1, the last_seq line', { timeout: 60_000 }, async (t) => {
  const proxy = await startProxy(t, new URL(server.service.url));
  const seqs = [await post('quiet'), await post('quiet')];
  const { connect, epoch } = await connected(t, 'quiet', proxy.url, seqs);
  proxy.links[0]?.blackhole();
  // Twice the heartbeat is 2 s; the bound leaves room for a loaded machine, well short
  // of the server's own idle timeout (60 s) — which the command would not see anyway.
  const bound = new Promise<'bound'>((resolve) => setTimeout(() => resolve('bound'), 20_000).unref());
  assert.notEqual(await Promise.race([connect.exited, bound]), 'bound', `still running on a silent connection\nstderr:\n${connect.stderr()}`);
  assert.deepEqual(await connect.exited, { code: 1, signal: null }, connect.stderr());
  const silent = /^nothing from the service for (\d+\.\d) s, not even a ping \(twice its heartbeat: docs\/protocol\.md, "Detecting a dead connection"\): dropping the connection\nclosed 1006\n$/.exec(connect.stderr());
  assert.ok(silent, connect.stderr());
  assert.ok(Number(silent[1]) >= 2, `dropped after ${silent[1]} s of silence, not twice the heartbeat`);
  const lines = connect.lines();
  assert.deepEqual(JSON.parse(lines.at(-1) as string), { last_seq: seqs[1], epoch: epoch ?? JSON.parse(lines.find((l) => l.startsWith('{"t":"msg"')) as string).epoch });
  assert.equal(lines.filter((l) => l.startsWith('{"t":"pong"')).length, 0, 'its own pings\' pongs are not printed');
});

test('pixiu connect keeps a connection whose uplink is held while the server\'s pings still come', { timeout: 60_000 }, async (t) => {
  const proxy = await startProxy(t, new URL(server.service.url));
  const { connect } = await connected(t, 'uplink', proxy.url, []);
  const link = proxy.links[0] as ProxiedLink;
  link.holdUplink();
  // Four of the server's pings, 1 s apart: past twice the heartbeat with nothing from the
  // client reaching the server (its own pings are held) — the pings it gets are life.
  const from = link.serverPings;
  await new Promise<void>((resolve) => {
    const check = setInterval(() => {
      if (link.serverPings - from >= 4 || connect.proc.exitCode !== null) {
        clearInterval(check);
        resolve();
      }
    }, 50);
  });
  assert.equal(connect.proc.exitCode, null, `it dropped a connection whose server still pinged\nstderr:\n${connect.stderr()}`);
  link.release();
  const seq = await post('uplink');
  await connect.line((l) => l.startsWith('{"t":"msg"') && (JSON.parse(l) as { seq: number }).seq === seq, `msg ${seq}`);
  connect.signal('SIGINT');
  assert.deepEqual(await connect.exited, { code: 0, signal: null }, connect.stderr());
  assert.equal(connect.stderr(), 'closed 1000 bye\n');
  assert.equal(connect.lines().filter((l) => l.startsWith('{"t":"pong"')).length, 0, 'its own pings\' pongs are not printed');
});
