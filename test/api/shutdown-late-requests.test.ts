/**
 * What a request sent once HTTP draining has begun gets (docs/api.md, "Shutdown";
 * docs/decisions.md, "Shutdown drains HTTP"), in process, on a real port: a request
 * whose head had begun to arrive before draining is answered 503 UNAVAILABLE in the
 * catalogue's shape, with `Retry-After: 1` and `Connection: close` (not fastify's own
 * 503 body, which had no Retry-After: a contract tester's finding); on a keep-alive connection that was idle the client sees the
 * connection closed, unanswered; pipelined behind the request in flight, the first is
 * refused 503 after that one's answer, which leaves the close to it, and those behind
 * that refusal get nothing. None of them is done. (A newcomer found the docs promising
 * the 503 for all of them.)
 *
 * Requests pipelined on one connection while the node drains — in the drain delay
 * (`PIXIU_DRAIN_DELAY`) or in flight as it closes — are each answered: only the answer
 * of the last one in progress carries `Connection: close` (before, the first one's did,
 * and Node wrote nothing after it: the messages behind it were stored, never answered);
 * one that arrives once that close was decided is not acted on.
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

/** One answer read off a raw connection: its status, its head (status line and headers) and its body. */
interface RawResponse {
  readonly status: number;
  readonly head: string;
  readonly body: string;
}

/** The whole responses in `text`, in order (an interim 100 has no body; the others a Content-Length). */
function responses(text: string): RawResponse[] {
  const found: RawResponse[] = [];
  let at = 0;
  for (;;) {
    const end = text.indexOf('\r\n\r\n', at);
    if (end < 0) return found;
    const head = text.slice(at, end);
    const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
    const length = status === 100 ? 0 : Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
    if (!Number.isInteger(status) || !Number.isInteger(length) || text.length < end + 4 + length) return found;
    found.push({ status, head, body: text.slice(end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
}

/** The status codes of the responses in `text`, in order. */
function statuses(text: string): number[] {
  return responses(text).map((r) => r.status);
}

test('once draining has begun: a request whose head was arriving gets 503 UNAVAILABLE in the error shape, with Retry-After and Connection: close; an idle keep-alive connection is closed unanswered; one pipelined behind the request in flight is refused 503 after its answer; none is done', { timeout: 60_000 }, async () => {
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

  // The body of the request in flight, and two requests pipelined behind it: the first is
  // done and answered, the second refused after it, its answer closing the connection;
  // the third, behind that close, is not acted on and gets no answer.
  inFlight.socket.write(`${body}${post('lee')}GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  const answered = responses(await inFlight.closed);
  assert.deepEqual(answered.map((r) => r.status), [100, 201, 503], JSON.stringify(answered));
  assert.doesNotMatch(`${answered[1]?.head ?? ''}\r\n`, /\r\nConnection: close\r\n/i, 'the close is left to the last answer');
  assert.match(`${answered[2]?.head ?? ''}\r\n`, /\r\nConnection: close\r\n/i);

  await closing;
  assert.deepEqual((await readWholeInbox(inbox, 'lee')).map((e) => e.seq), [1], 'only the request in flight was done');
});

/**
 * A service of its own, an inbox reader on its Redis (which can also pause that Redis's
 * writes), and `POST /v1/messages` requests to user `pia` written byte for byte.
 */
async function pipeliningService(prefix: string): Promise<{
  server: Awaited<ReturnType<typeof startInProcessAlone>>['server'];
  redis: Awaited<ReturnType<typeof openInbox>>['redis'];
  port: number;
  post(data: number): string;
  /** The ids of the messages stored for `pia` (appended to her inbox), in order. */
  stored(): Promise<string[]>;
  /** Resolves once the node's HTTP server has been handed `count` requests in all (dispatched or dropped). */
  parsed(count: number): Promise<void>;
}> {
  const { redis: redisServer, server } = await startInProcessAlone(files, { redisPrefix: prefix });
  const { inbox, redis } = await openInbox(files, redisServer.url, prefix);
  files.after(() => redis.call('CLIENT', 'UNPAUSE').catch(() => undefined));
  const auth = `Authorization: Bearer ${server.service.secrets.apiToken}`;
  let requests = 0;
  const counted = new Set<() => void>();
  server.service.app.server.on('request', () => {
    requests += 1;
    for (const wake of counted) wake();
  });
  return {
    server,
    redis,
    port: Number(new URL(server.service.url).port),
    post: (data) => {
      const body = JSON.stringify({ to: 'pia', type: 't', data });
      return [`POST /v1/messages HTTP/1.1`, 'Host: 127.0.0.1', auth, 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n');
    },
    stored: async () => (await readWholeInbox(inbox, 'pia')).map((e) => e.id),
    parsed: (count) => new Promise<void>((resolve) => {
      const check = (): void => {
        if (requests < count) return;
        counted.delete(check);
        resolve();
      };
      counted.add(check);
      check();
    }),
  };
}

/** The ids of the messages whose 201 is among `answers` (`POST /v1/messages` answers), in order. */
function answeredIds(answers: readonly RawResponse[]): string[] {
  return answers.filter((r) => r.status === 201).map((r) => (JSON.parse(r.body) as { id: string }).id);
}

test('in the drain delay, requests pipelined in one write are all acted on and all answered: only the last answer carries Connection: close', { timeout: 60_000 }, async () => {
  const node = await pipeliningService('drainpipe:');
  const cut = new AbortController();
  const drained = node.server.service.drain(60_000, cut.signal); // SIGTERM with PIXIU_DRAIN_DELAY=60s
  const conn = await connect(node.port);
  conn.socket.write(node.post(1) + node.post(2) + node.post(3));
  const answers = responses(await conn.closed);
  assert.deepEqual(answers.map((r) => r.status), [201, 201, 201], JSON.stringify(answers));
  assert.deepEqual(answers.map((r) => /\r\nConnection: close\r\n/i.test(`${r.head}\r\n`)), [false, false, true], 'the last answer ends the connection');
  assert.deepEqual(await node.stored(), answeredIds(answers), 'each message stored was answered, and only those');
  cut.abort();
  await drained;
});

test('in the drain delay, a request that arrives once the connection\'s closing answer was decided is not acted on: every message stored was answered', { timeout: 60_000 }, async () => {
  const node = await pipeliningService('drainlate:');
  const cut = new AbortController();
  const drained = node.server.service.drain(60_000, cut.signal);
  // A POST held on its Redis write (paused), and a GET pipelined behind it, answered at
  // once: the last in progress, its answer carries the close (written after the POST's).
  await node.redis.call('CLIENT', 'PAUSE', '20000', 'WRITE');
  const conn = await connect(node.port);
  conn.socket.write(`${node.post(1)}GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  await node.parsed(2);
  // Sent before the client read that close: parsed and handed over, never acted on.
  conn.socket.write(node.post(2));
  await node.parsed(3);
  await node.redis.call('CLIENT', 'UNPAUSE');
  const answers = responses(await conn.closed);
  assert.deepEqual(answers.map((r) => r.status), [201, 200], JSON.stringify(answers));
  assert.match(`${answers[1]?.head ?? ''}\r\n`, /\r\nConnection: close\r\n/i);
  assert.deepEqual(await node.stored(), answeredIds(answers), 'the POST sent after the closing answer stored nothing: each message stored was answered');
  cut.abort();
  await drained;
});

test('as the node closes, requests pipelined in one write and in flight are all answered: only the last answer carries Connection: close', { timeout: 60_000 }, async () => {
  const node = await pipeliningService('closepipe:');
  // Three POSTs in flight, held on their Redis writes (paused) while the node begins to close.
  await node.redis.call('CLIENT', 'PAUSE', '20000', 'WRITE');
  const conn = await connect(node.port);
  conn.socket.write(node.post(1) + node.post(2) + node.post(3));
  await node.parsed(3);
  const closing = node.server.service.close(); // SIGTERM
  await waitUntilNotAccepting(node.server.service.url);
  await node.redis.call('CLIENT', 'UNPAUSE');
  const answers = responses(await conn.closed);
  assert.deepEqual(answers.map((r) => r.status), [201, 201, 201], JSON.stringify(answers));
  assert.deepEqual(answers.map((r) => /\r\nConnection: close\r\n/i.test(`${r.head}\r\n`)), [false, false, true], 'the last answer ends the connection');
  assert.deepEqual(await node.stored(), answeredIds(answers), 'each message stored was answered, and only those');
  await closing;
});
