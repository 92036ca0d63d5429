/**
 * One HTTP exchange written byte for byte on a TCP socket, for requests `fetch` will not
 * send (the WebSocket upgrade headers, `Upgrade: h2c` with a body, an `Expect` other than
 * 100-continue, a HEAD that asks for an upgrade): read until the server closes the
 * connection, so each request should make it close (`Connection: close`, an upgrade, a
 * refusal that ends the connection), or the wait bound ends it.
 */
import net from 'node:net';

/**
 * The last answer in `text` (what a raw exchange read: several answers when requests
 * were pipelined), from its status line (`HTTP/1.1 …`) to the end; '' when it holds none.
 */
export function lastAnswer(text: string): string {
  const at = text.lastIndexOf('HTTP/1.1 ');
  return at < 0 ? '' : text.slice(at);
}

/** One answer's parts: its status, headers and body (see {@link parseAnswer}). */
export interface ParsedAnswer {
  readonly status: number;
  readonly headers: Headers;
  /** The body as sent (its bytes as `text` held them). */
  readonly text: string;
  /** The body parsed as JSON; undefined when it is not JSON (or there is none). */
  readonly body: unknown;
}

/**
 * Splits one answer's text (status line, headers, blank line, body; e.g. from
 * {@link lastAnswer}) into its parts; the status is 0 when the status line has none.
 * @throws TypeError when a head line is not a header (`Headers` refuses its name)
 */
export function parseAnswer(one: string): ParsedAnswer {
  const { headLines, ...rest } = answerParts(one);
  const headers = new Headers(headLines.map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()] as [string, string]));
  return { ...rest, headers };
}

/**
 * {@link parseAnswer}'s parts but the headers, whose lines are given as read: never
 * throws, whatever a peer sent ({@link rawRequest} reads it in a socket's `close` handler,
 * where a throw is an uncaught exception, not a rejection).
 */
function answerParts(one: string): Omit<ParsedAnswer, 'headers'> & { readonly headLines: string[] } {
  const [head = '', text = ''] = one.split('\r\n\r\n');
  const [statusLine = '', ...headLines] = head.split('\r\n');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headLines, text, body };
}

/** What one raw exchange saw. */
export interface RawAnswer {
  /** The first answer's status; 0 when none came. */
  readonly status: number;
  /** The first answer's status line and headers. */
  readonly head: string;
  /** The first answer's body parsed as JSON; undefined when it is not JSON (or there is none). */
  readonly body: unknown;
  /** The server closed the connection (the client never did). */
  readonly closedByServer: boolean;
  /** Everything the server sent (several answers, when requests were pipelined), read as latin1. */
  readonly text: string;
}

/** How {@link rawRequest} sends. */
export interface RawOptions {
  /** The client ends its side right after sending, as a client that is done. */
  readonly halfClose?: boolean;
  /** How long to read before the socket is destroyed, ms from connecting: 10 s unless given. */
  readonly waitMs?: number;
}

/**
 * Sends `request` to `url`'s host and port and reads until the server closes the
 * connection, or `waitMs`.
 */
export function rawRequest(url: string, request: string, opts: RawOptions = {}): Promise<RawAnswer> {
  const { port, hostname } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(request);
      if (opts.halfClose === true) socket.end();
    });
    let data = '';
    let closedByServer = false;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => { data += chunk; });
    socket.on('end', () => { closedByServer = true; });
    socket.on('error', reject);
    const timer = setTimeout(() => socket.destroy(), opts.waitMs ?? 10_000);
    socket.on('close', () => {
      clearTimeout(timer);
      const { status, body } = answerParts(data);
      resolve({ status, head: data.split('\r\n\r\n')[0] ?? '', body, closedByServer, text: data });
    });
  });
}
