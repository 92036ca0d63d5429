/**
 * The child side of {@link WsSwarm} (ws-swarm.ts): a process holding thousands of
 * WebSocket clients, so that their receiving does not share an event loop with the
 * server under test nor with the test's own measurements. Driven over the IPC channel
 * with the requests below; every answer carries the request's `id`.
 *
 * It counts `bcast` frames per connection and keeps their `bseq`s (and the types of
 * any other frame but `welcome`), and times triggers: from the moment it starts a
 * trigger (the POSTs of a burst, or a bare server's `GET /go`) until every connection
 * has received the expected number of new broadcasts — all in this process's clock.
 *
 * Run only by ws-swarm.ts: `node --import tsx ws-swarm-child.ts` with an IPC channel.
 */
import { createRequire } from 'node:module';
import type WsWebSocket from 'ws';
import { mintToken } from '../../src/auth/mint-token.js';
import type { SwarmConn, SwarmReply, SwarmRequest, SwarmTrigger } from './ws-swarm.js';

// Required, not imported: ws is CommonJS, and an import reads it through its wrapper.mjs,
// translating each of its modules for ESM (~0.03 s of CPU in a test process that runs
// the service, ~0.05 s in one that does not; src/cli/connect.ts does the same).
const WebSocket = createRequire(import.meta.url)('ws') as typeof WsWebSocket;
type WebSocket = WsWebSocket;

/** One client and what it received. */
interface Client {
  readonly ws: WebSocket;
  /** `bseq` of every `bcast` frame, in arrival order. */
  readonly bseqs: string[];
  /** Types of frames other than `bcast` and `welcome` (`gap`, `reset`, `msg`, `error` …). */
  readonly others: string[];
}

const clients: Client[] = [];
/** Called on every `bcast` frame with its client's index (the open `expect`, if any). */
let onBcast: ((index: number) => void) | undefined;

function reply(message: SwarmReply): void {
  process.send?.(message);
}

/** Opens one client; resolves once open (and its `welcome` arrived, when asked). */
function open(url: string, token: string | undefined, conn: SwarmConn, welcome: boolean): Promise<Client> {
  const target = new URL('/v1/connect', url.replace(/^http/, 'ws'));
  if (conn.device !== undefined) target.searchParams.set('device', conn.device);
  if (conn.lastBseq !== undefined) target.searchParams.set('last_bseq', conn.lastBseq);
  const ws = new WebSocket(target, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    perMessageDeflate: false,
    // The frames are the server's own JSON text; skipping the check keeps this process's
    // cost per frame low, so the server, not the clients, is what a bench measures.
    skipUTF8Validation: true,
  });
  const client: Client = { ws, bseqs: [], others: [] };
  const index = clients.length;
  clients.push(client);
  return new Promise((resolve, reject) => {
    let welcomed = !welcome;
    ws.on('message', (data) => {
      const frame = JSON.parse(data.toString()) as { t: string; bseq?: string };
      if (frame.t === 'bcast') {
        client.bseqs.push(frame.bseq ?? '');
        onBcast?.(index);
      } else if (frame.t === 'welcome') {
        if (!welcomed) {
          welcomed = true;
          resolve(client);
        }
      } else {
        client.others.push(frame.t);
      }
    });
    ws.once('open', () => {
      if (welcomed) resolve(client);
    });
    ws.once('unexpected-response', (_req, res) => reject(new Error(`connect refused: HTTP ${res.statusCode}`)));
    ws.once('error', reject);
    ws.once('close', (code) => {
      if (!welcomed) reject(new Error(`closed ${code} before welcome`));
    });
  });
}

async function connect(req: Extract<SwarmRequest, { op: 'connect' }>): Promise<SwarmReply> {
  const start = performance.now();
  const key = req.jwtSecret === undefined ? undefined : { kind: 'secret' as const, secret: req.jwtSecret };
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < req.conns.length) {
      const conn = req.conns[next++] as SwarmConn;
      const token = key === undefined ? undefined : await mintToken(key, { user: conn.user, ttlSec: 3600, ...(conn.tags ? { tags: conn.tags } : {}) });
      await open(req.url, token, conn, req.welcome);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, req.concurrency) }, worker));
  return { id: req.id, op: 'connected', count: clients.length, ms: performance.now() - start };
}

async function fire(trigger: SwarmTrigger): Promise<string[]> {
  if (trigger.kind === 'get') {
    const res = await fetch(trigger.url);
    if (!res.ok) throw new Error(`GET ${trigger.url}: HTTP ${res.status}`);
    await res.arrayBuffer();
    return [];
  }
  // Every POST of the burst goes out at once: the server gets them back to back.
  return Promise.all(trigger.bodies.map(async (body) => {
    const res = await fetch(trigger.url, {
      method: 'POST', headers: { authorization: `Bearer ${trigger.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`POST ${trigger.url}: HTTP ${res.status} ${text}`);
    return (JSON.parse(text) as { bseq: string }).bseq;
  }));
}

async function expect(req: Extract<SwarmRequest, { op: 'expect' }>): Promise<SwarmReply> {
  if (onBcast !== undefined) throw new Error('an expect is already open');
  const base = clients.map((c) => c.bseqs.length);
  let firstLeft = clients.length;
  let allLeft = clients.length;
  let firstAllAt = 0;
  const start = performance.now();
  const done = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      onBcast = undefined;
      reject(new Error(`timed out after ${req.timeoutMs} ms: ${allLeft} of ${clients.length} connections short of ${req.count} new broadcasts`));
    }, req.timeoutMs);
    const check = (index: number): void => {
      const got = (clients[index] as Client).bseqs.length - (base[index] as number);
      if (got === 1 && --firstLeft === 0) firstAllAt = performance.now();
      if (got === req.count && --allLeft === 0) {
        clearTimeout(timer);
        onBcast = undefined;
        resolve(performance.now());
      }
    };
    onBcast = check;
  });
  const bseqs = req.trigger ? await fire(req.trigger) : [];
  const postedAt = performance.now();
  const doneAt = await done;
  return { id: req.id, op: 'expected', ms: doneAt - start, firstAllMs: firstAllAt - start, postMs: postedAt - start, bseqs };
}

async function handle(req: SwarmRequest): Promise<SwarmReply> {
  switch (req.op) {
    case 'connect':
      return connect(req);
    case 'expect':
      return expect(req);
    case 'received':
      return { id: req.id, op: 'received', bseqs: clients.map((c) => c.bseqs), others: clients.map((c) => c.others) };
    case 'close':
      await Promise.all(clients.map((c) => new Promise<void>((resolve) => {
        if (c.ws.readyState === WebSocket.CLOSED) return resolve();
        c.ws.once('close', () => resolve());
        c.ws.close(1000);
      })));
      return { id: req.id, op: 'closed' };
  }
}

process.on('message', (raw) => {
  const req = raw as SwarmRequest;
  handle(req).then(reply, (err: unknown) => reply({ id: req.id, op: 'failed', error: err instanceof Error ? err.message : String(err) }));
});
process.on('disconnect', () => process.exit(0));
