/**
 * What a request sent once HTTP draining has begun gets (docs/api.md, "Shutdown";
 * docs/decisions.md, "Shutdown drains HTTP"), in process, on a real port: a request
 * whose head had begun to arrive before draining is answered 503 UNAVAILABLE in the
 * catalogue's shape, with `Retry-After: 1` and `Connection: close` (not fastify's own
 * 503 body, which had no Retry-After: a contract tester's finding); on a keep-alive connection that was idle the client sees the
 * connection closed, unanswered; pipelined behind the request in flight, it sees the
 * connection close after that one's answer. None of them is done. (A newcomer found the
 * docs promising the 503 for all of them: only the first gets it.)
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { SHUTTING_DOWN } from '../../src/api/app.js';
import { openInbox, readWholeInbox, waitUntilNotAccepting } from '../harness/checks.js';
import { cleanupList, startInProcessAlone } from '../harness/pixiu-server.js';

const files = cleanupList();
after(() => files.run());

/** A raw connection to `port` and everything it has received. */
interface RawConnection {
  readonly socket: net.Socket;
  /** What has arrived so far. */
  received(): string;
  /** Resolves with everything received, once the connection has closed. */
  readonly closed: Promise<string>;
  /** Resolves once what has arrived includes `text`. */
  arrived(text: string): Promise<void>;
}

async function connect(port: number): Promise<RawConnection> {
  const socket = net.connect(port, '127.0.0.1');
  files.after(() => socket.destroy());
  let got = '';
  const waiters = new Set<() => void>();
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    got += chunk;
    for (const wake of waiters) wake();
  });
  // A reset is a close too: what matters here is what arrived before it.
  socket.on('error', () => undefined);
  const closed = once(socket, 'close').then(() => got);
  await once(socket, 'connect');
  return {
    socket,
    received: () => got,
    closed,
    arrived: (text) => new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (!got.includes(text)) return;
        waiters.delete(check);
        resolve();
      };
      waiters.add(check);
      check();
      void closed.then(() => {
        check();
        reject(new Error(`closed without ${JSON.stringify(text)}:\n${got}`));
      });
    }),
  };
}

/** The status codes of the responses in `text`, in order. */
function statuses(text: string): number[] {
  return [...text.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((m) => Number(m[1]));
}

test('once draining has begun: a request whose head was arriving gets 503 UNAVAILABLE in the error shape, with Retry-After and Connection: close; an idle keep-alive connection is closed unanswered; one pipelined behind the request in flight is never answered; none is done', { timeout: 60_000 }, async () => {
  const { redis, server } = await startInProcessAlone(files, { redisPrefix: 'late:' });
  const { inbox } = await openInbox(files, redis.url, 'late:');
  const port = Number(new URL(server.service.url).port);
  const auth = `Authorization: Bearer ${server.service.secrets.apiToken}`;
  const post = (to: string): string => {
    const body = JSON.stringify({ to, type: 't', data: 1 });
    return [`POST /v1/messages HTTP/1.1`, 'Host: 127.0.0.1', auth, 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n');
  };

  // In flight: the server has its head (100 Continue), not its body; it holds the drain open.
  const inFlight = await connect(port);
  const body = JSON.stringify({ to: 'lee', type: 't', data: 0 });
  inFlight.socket.write([`POST /v1/messages HTTP/1.1`, 'Host: 127.0.0.1', auth, 'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`, 'Expect: 100-continue', '', ''].join('\r\n'));
  await inFlight.arrived('100 Continue');
  // Half a request head: its connection is not idle when draining begins.
  const halfHead = await connect(port);
  const head = post('lee').split('\r\n\r\n')[0] as string;
  halfHead.socket.write(head.slice(0, head.length - 20));
  // A keep-alive connection with one request answered, idle since. Its answer also
  // comes after the server has read the half head, sent first, in this one process.
  const idle = await connect(port);
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await idle.arrived('{"status":"ok"}');

  const closing = server.service.close(); // SIGTERM
  await waitUntilNotAccepting(server.service.url);

  // The idle connection is closed by the server, with nothing more sent on it.
  assert.deepEqual(statuses(await idle.closed), [200], 'nothing after the answer before draining');

  // The rest of the half head: answered 503 in the catalogue's shape, as every 503 is.
  halfHead.socket.write(`${head.slice(head.length - 20)}\r\n\r\n${JSON.stringify({ to: 'lee', type: 't', data: 1 })}`);
  const refused = await halfHead.closed;
  assert.deepEqual(statuses(refused), [503], refused);
  assert.match(refused, /\r\nConnection: close\r\n/i);
  assert.match(refused, /\r\nRetry-After: 1\r\n/i);
  assert.match(refused, /\r\nContent-Type: application\/json; charset=utf-8\r\n/i);
  const [, refusedBody] = refused.split('\r\n\r\n');
  assert.deepEqual(JSON.parse(refusedBody ?? ''), { error: { code: 'UNAVAILABLE', message: SHUTTING_DOWN } });

  // The body of the request in flight, and a request pipelined behind it: only the first answered.
  inFlight.socket.write(`${body}${post('lee')}`);
  const answered = await inFlight.closed;
  assert.deepEqual(statuses(answered), [100, 201], answered);

  await closing;
  assert.deepEqual((await readWholeInbox(inbox, 'lee')).map((e) => e.seq), [1], 'only the request in flight was done');
});
