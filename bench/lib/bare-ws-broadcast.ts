/**
 * The ceiling of `bench:broadcast`: a bare `ws` server in its own process that accepts
 * WebSocket connections on `/v1/connect` (no auth, no protocol) and, on `GET /go?n=N`,
 * sends the frame given in `BARE_WS_FRAME` N times to every connected client, in one
 * synchronous loop per frame (`ws.send` of the same text frame to each socket, as a
 * broadcast loop with nothing else to do would). `GET /cpu` answers the process's
 * CPU time so far (`{userMicros, systemMicros}`), so the bench can compare the CPU cost per frame.
 *
 * Run by bench/broadcast.ts; prints `{"msg": "bare ws listening", "url": …}` once it
 * listens on 127.0.0.1 (port 0: any free one) and exits on SIGTERM.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { WebSocketServer } from 'ws';

const frame = process.env.BARE_WS_FRAME ?? '{"t":"bcast"}';
// Encoded once, as Pixiu does: a string would be encoded again for every socket, and
// measured ~10 % more CPU per frame here (so the bytes make the stronger ceiling).
const frameBytes = Buffer.from(frame);
const TEXT_FRAME = { binary: false };
const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  if (url.pathname === '/go') {
    const n = Number(url.searchParams.get('n') ?? '1');
    if (url.searchParams.get('cork') === '1') {
      // Client by client, the n frames corked together: one write per socket.
      for (const client of wss.clients) {
        const socket = Reflect.get(client, '_socket') as Socket;
        socket.cork();
        for (let i = 0; i < n; i++) client.send(frameBytes, TEXT_FRAME);
        socket.uncork();
      }
    } else {
      for (let i = 0; i < n; i++) for (const client of wss.clients) client.send(frameBytes, TEXT_FRAME);
    }
    res.end('ok');
  } else if (url.pathname === '/cpu') {
    const cpu = process.cpuUsage();
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ userMicros: cpu.user, systemMicros: cpu.system }));
  } else {
    res.statusCode = 404;
    res.end();
  }
});
const wss = new WebSocketServer({ server, path: '/v1/connect', perMessageDeflate: false });
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  process.stdout.write(`${JSON.stringify({ msg: 'bare ws listening', url: `http://127.0.0.1:${port}` })}\n`);
});
process.once('SIGTERM', () => {
  for (const c of wss.clients) c.terminate();
  server.close(() => process.exit(0));
});
