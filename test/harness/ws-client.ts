/**
 * A WebSocket test client for the gateway (`ws` package, a real socket). Frames are
 * queued as they arrive; tests wait on them (`next`, `nextOf`, `msgs`) or on the close,
 * never on sleeps. Every wait is bounded and fails with what was received so far.
 */
import { createRequire } from 'node:module';
import type WsWebSocket from 'ws';
import { mintToken } from '../../src/auth/mint-token.js';
import type { JwtKeySource } from '../../src/auth/secrets.js';

// Required, not imported: ws is CommonJS, and an import reads it through its wrapper.mjs,
// translating each of its modules for ESM (~0.03 s of CPU in a test process that runs
// the service, ~0.05 s in one that does not; src/cli/connect.ts does the same).
const WebSocket = createRequire(import.meta.url)('ws') as typeof WsWebSocket;
type WebSocket = WsWebSocket;

/** A server frame as received (loosely typed: tests assert the shape). */
export interface Frame {
  t: string;
  [field: string]: unknown;
}

/** What a `msg` or `gap` frame says, in short (`msg <seq> <id>`, `gap <from>-<to> <reason>`), for comparing streams of them. */
export function frameSaid(f: Frame): string {
  return f.t === 'msg' ? `msg ${String(f.seq)} ${String(f.id)}` : `${f.t} ${String(f.from)}-${String(f.to)} ${String(f.reason)}`;
}

/** A refusal before the upgrade: the HTTP status, its headers and the JSON body. */
export class Refused extends Error {
  constructor(readonly status: number, readonly body: unknown, readonly text: string, readonly headers: Headers) {
    super(`connection refused: HTTP ${status} ${text}`);
  }
}

/** Query parameters of `/v1/connect`. */
export interface ConnectParams {
  device?: string;
  last_seq?: number | string;
  epoch?: string;
  from?: string;
  last_bseq?: string;
  token?: string;
  [extra: string]: string | number | undefined;
}

/** Options of {@link TestClient.connect}. */
export interface ConnectOptions {
  /** The JWT; sent as `Authorization: Bearer` unless `params.token` carries one. */
  token?: string;
  params?: ConnectParams;
  headers?: Record<string, string>;
  /** Default bound for waits, ms. */
  timeoutMs?: number;
}

/** Mints a client token with the service's HS256 key. */
export function testToken(key: JwtKeySource, user: string, opts: { ttlSec?: number; tags?: string[]; channels?: string[] } = {}): Promise<string> {
  return mintToken(key, { user, ttlSec: opts.ttlSec ?? 3600, ...(opts.tags ? { tags: opts.tags } : {}), ...(opts.channels ? { channels: opts.channels } : {}) });
}

/** One connected client. */
export class TestClient {
  readonly ws: WebSocket;
  readonly frames: Frame[] = [];
  /** Resolves with the close code and reason once the socket closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly #timeoutMs: number;
  #read = 0;
  #waiters: Array<() => void> = [];
  #closeInfo: { code: number; reason: string } | undefined;

  private constructor(ws: WebSocket, timeoutMs: number) {
    this.ws = ws;
    this.#timeoutMs = timeoutMs;
    ws.on('message', (data, isBinary) => {
      const text = isBinary ? '' : data.toString();
      try {
        this.frames.push(JSON.parse(text) as Frame);
      } catch {
        this.frames.push({ t: '(not json)', text });
      }
      this.#wake();
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        this.#closeInfo = { code, reason: reason.toString() };
        this.#wake();
        resolve(this.#closeInfo);
      });
    });
    ws.on('error', () => undefined);
  }

  /**
   * Connects to `<baseUrl>/v1/connect`. Resolves once open; rejects with {@link Refused}
   * when the server answers the upgrade with an HTTP error.
   */
  static connect(baseUrl: string, opts: ConnectOptions = {}): Promise<TestClient> {
    const url = new URL('/v1/connect', baseUrl.replace(/^http/, 'ws'));
    for (const [k, v] of Object.entries(opts.params ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token !== undefined && opts.params?.token === undefined) headers.authorization = `Bearer ${opts.token}`;
    const ws = new WebSocket(url, { headers });
    const client = new TestClient(ws, opts.timeoutMs ?? 10_000);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client));
      ws.once('unexpected-response', (_req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => { text += c.toString(); });
        res.on('end', () => {
          let body: unknown;
          try { body = JSON.parse(text); } catch { body = undefined; }
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
          reject(new Refused(res.statusCode ?? 0, body, text, headers));
        });
      });
      ws.once('error', (err) => reject(err));
    });
  }

  /** Sends a frame (an object is JSON-encoded; a string is sent as is). */
  send(frame: object | string): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Acks up to `seq`. */
  ack(seq: number): void {
    this.send({ t: 'ack', seq });
  }

  /** The next unread frame. */
  async next(timeoutMs = this.#timeoutMs): Promise<Frame> {
    await this.#until(() => this.#read < this.frames.length, timeoutMs, 'a frame');
    return this.frames[this.#read++] as Frame;
  }

  /** Skips unread frames until one of type `t` (the skipped ones stay in `frames`). */
  async nextOf(t: string, timeoutMs = this.#timeoutMs): Promise<Frame> {
    for (;;) {
      const f = await this.next(timeoutMs);
      if (f.t === t) return f;
    }
  }

  /** Reads the next `n` frames of type `msg` (acking each when `ack` is true), skipping others. */
  async msgs(n: number, opts: { ack?: boolean; timeoutMs?: number } = {}): Promise<Frame[]> {
    const out: Frame[] = [];
    while (out.length < n) {
      const f = await this.nextOf('msg', opts.timeoutMs ?? this.#timeoutMs);
      out.push(f);
      if (opts.ack) this.ack(f.seq as number);
    }
    return out;
  }

  /** Resolves true if a frame arrives within `ms`, false otherwise (for "nothing more" checks). */
  async receivesWithin(ms: number): Promise<boolean> {
    try {
      await this.#until(() => this.#read < this.frames.length, ms, 'a frame');
      return true;
    } catch {
      return false;
    }
  }

  /** Waits for the close; returns its code and reason. */
  async waitClose(timeoutMs = this.#timeoutMs): Promise<{ code: number; reason: string }> {
    await this.#until(() => this.#closeInfo !== undefined, timeoutMs, 'the close');
    return this.#closeInfo as { code: number; reason: string };
  }

  /**
   * Closes the socket and waits for it. A client a test had stop reading is read again
   * first (else it never sees the server's answer), and one whose close handshake does
   * not end in time is cut, so that clean-up after a failed test leaves no socket
   * keeping the test process alive.
   */
  async close(code = 1000): Promise<void> {
    if (this.#closeInfo) return;
    if (this.ws.isPaused) this.ws.resume();
    this.ws.close(code);
    try {
      await this.waitClose();
    } catch (err) {
      this.ws.terminate();
      throw err;
    }
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }

  async #until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (cond()) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; unread: ${JSON.stringify(this.frames.slice(this.#read)).slice(0, 500)}; closed: ${JSON.stringify(this.#closeInfo)}`));
      }, timeoutMs);
      const check = (): void => {
        if (cond()) {
          clearTimeout(timer);
          resolve();
        } else if (this.#closeInfo !== undefined && what !== 'the close') {
          clearTimeout(timer);
          reject(new Error(`closed ${JSON.stringify(this.#closeInfo)} while waiting for ${what}; unread: ${JSON.stringify(this.frames.slice(this.#read)).slice(0, 500)}`));
        } else {
          this.#waiters.push(check);
        }
      };
      check();
    });
  }
}
