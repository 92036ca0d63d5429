/**
 * The ceiling of `bench:e2e`'s live delivery: a bare `ws` server in its own process,
 * doing the least a POST-to-WebSocket relay can do. It takes the same producer
 * requests as Pixiu (`POST /v1/messages` with a JSON body `{to, type, data}`) on a plain
 * `node:http` server, writes a frame shaped like Pixiu's `msg` frame
 * (`{t, seq, id, type, ts, data}`) to the recipient's socket at once, and answers 201
 * with a small JSON body shaped like Pixiu's. No storage, no Redis, no auth, no window.
 *
 * Clients connect to `GET /v1/connect?user=<uid>` and get a `{"t":"welcome"}` frame;
 * their frames (acks) are parsed as JSON and dropped, so the server reads what Pixiu
 * reads. A POST to a user with no socket answers 404.
 *
 * Run by bench/e2e.ts; prints `{"msg": "bare ws relay listening", "url": …}` once it
 * listens on 127.0.0.1 (port 0: any free one) and exits on SIGTERM.
 */
import http from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';

/** One connected user: its socket and the last seq written to it. */
interface Peer {
  readonly ws: WebSocket;
  seq: number;
}

/** The body of a producer request, as far as the relay reads it. */
interface PostBody {
  to?: unknown;
  type?: unknown;
  data?: unknown;
}

const peers = new Map<string, Peer>();
let nextId = 0;

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/v1/messages') {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body: PostBody;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString()) as PostBody;
    } catch {
      res.writeHead(400).end();
      return;
    }
    const user = typeof body.to === 'string' ? body.to : '';
    const peer = peers.get(user);
    if (peer === undefined) {
      res.writeHead(404).end();
      return;
    }
    const id = (++nextId).toString(16).padStart(16, '0');
    const seq = ++peer.seq;
    peer.ws.send(JSON.stringify({ t: 'msg', seq, id, type: body.type, ts: Date.now(), data: body.data }));
    res.writeHead(201, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ id, recipients: [{ user, seq }], duplicate: false }));
  });
});

const wss = new WebSocketServer({ server, path: '/v1/connect', maxPayload: 4096, perMessageDeflate: false });
wss.on('connection', (ws, req) => {
  const user = new URL(req.url ?? '/', 'http://x').searchParams.get('user') ?? '';
  const peer: Peer = { ws, seq: 0 };
  peers.set(user, peer);
  ws.on('message', (data) => {
    try {
      JSON.parse(data.toString());
    } catch {
      // Acks are all the relay expects; anything else is ignored.
    }
  });
  ws.on('close', () => {
    if (peers.get(user) === peer) peers.delete(user);
  });
  ws.on('error', () => undefined);
  ws.send('{"t":"welcome"}');
});

server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  process.stdout.write(`${JSON.stringify({ msg: 'bare ws relay listening', url: `http://127.0.0.1:${port}` })}\n`);
});
process.once('SIGTERM', () => {
  for (const p of peers.values()) p.ws.terminate();
  wss.close();
  server.close(() => process.exit(0));
});
