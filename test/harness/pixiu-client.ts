/**
 * An HTTP client for one Pixiu server, with its API token (docs/api.md): each answer's
 * status, headers, text and parsed JSON body, and its wall time. Never throws for an
 * HTTP status, only for a network failure. Re-exported by pixiu-server.ts, where the
 * tests take it from.
 */
/** One HTTP answer, its body read as text and, when it is JSON, parsed. */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The parsed JSON body; `undefined` when the body is not JSON. */
  readonly body: unknown;
  /** Wall time from sending to the last body byte, ms. */
  readonly elapsedMs: number;
}

/** Options of one {@link PixiuClient.request}. */
export interface RequestOptions {
  /** Sent as JSON (content type application/json) unless it is already a string. */
  readonly body?: unknown;
  /** Extra or replacing headers; `authorization: ''` removes the token. */
  readonly headers?: Record<string, string>;
}

/** Authorized requests to one Pixiu server. */
export class PixiuClient {
  /**
   * @param url `http://host:port`
   * @param token the API token sent as `Authorization: Bearer <token>`
   */
  constructor(readonly url: string, readonly token: string) {}

  /** Sends one request; never throws for an HTTP status (only for a network failure). */
  async request(method: string, route: string, opts: RequestOptions = {}): Promise<HttpAnswer> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    for (const [k, v] of Object.entries(opts.headers ?? {})) headers[k.toLowerCase()] = v;
    if (headers.authorization === '') delete headers.authorization;
    const start = performance.now();
    const res = await fetch(new URL(route, this.url), { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    const elapsedMs = performance.now() - start;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, text, body: parsed, elapsedMs };
  }

  /** `GET route`. */
  get(route: string, opts?: RequestOptions): Promise<HttpAnswer> {
    return this.request('GET', route, opts);
  }

  /** `POST route` with a JSON body. */
  post(route: string, body: unknown, opts?: Omit<RequestOptions, 'body'>): Promise<HttpAnswer> {
    return this.request('POST', route, { ...opts, body });
  }
}
