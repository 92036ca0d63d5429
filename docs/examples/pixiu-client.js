// A browser client of Pixiu's WebSocket protocol, written from docs/protocol.md ("A client
// in one screen") in plain JavaScript with no dependencies: the browser's WebSocket,
// sessionStorage, localStorage and performance.now. Per tab it keeps the last_seq and
// epoch of the messages it shows, shows each message once, acks, follows gaps and resets,
// refreshes its token, watches the downlink, and reconnects with a back-off. Broadcasts
// and channels (points 5 and 6) are left out. test/examples/browser-client.test.ts runs it.
//
//   import { PixiuClient } from './pixiu-client.js';
//   const client = new PixiuClient({
//     url: 'wss://chat.example.com/v1/connect',
//     user: 'alice',                                   // the token's sub
//     getToken: async () => (await fetch('/pixiu-token')).json(), // {token, expires_in?}
//     onMessage: (msg) => show(msg),                   // each message once, in seq order
//     onGap: (gap) => notice(gap),                     // {from, to, reason}: seqs that are gone
//     onStatus: (status, detail) => badge(status),     // open, closed, failing, stopped
//     // Optional, 10 s each: the connect timeout, the quiet spell before a ping, and how
//     // long after the ping nothing at all may come. The 10 s figures assume a round trip
//     // well under 10 s; on links with round trips of seconds (congested cellular,
//     // satellite) give longer ones, e.g. 30 s for the timeout and the deadline, or
//     // scale them with the round trip you measure (a ping to its pong): docs/protocol.md,
//     // "A handshake that never ends" and "Detecting a dead connection".
//     connectTimeoutMs: 10_000, quietMs: 10_000, deadlineMs: 10_000,
//   });
//   client.start();

const ACK_QUIET_MS = 200; // ack once no message came for this long…
const ACK_EVERY = 50; // …or every 50 messages: well inside the window (100)
const KEEP_IDS = 10_000; // ids kept to show nothing twice after a reset (PIXIU_INBOX_CAP)
const STOP_CODES = new Set([1002, 1007, 1009, 4003]); // "fix the client": never reconnect

/** A moment, on both clocks. */
const moment = () => ({ mono: performance.now(), wall: Date.now() });

/** Ms since a {@link moment}: the larger of the two clocks' differences (a monotonic clock may stand still while the machine sleeps). */
const since = (then) => Math.max(performance.now() - then.mono, Date.now() - then.wall);

/** A JWT's claims: its middle part, base64url of UTF-8 JSON. */
function claimsOf(token) {
  const b64 = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))));
}

export class PixiuClient {
  constructor(opts) {
    // 10 s each assume a round trip well under 10 s (see the usage above to change them).
    this.opts = { connectTimeoutMs: 10_000, quietMs: 10_000, deadlineMs: 10_000, ...opts };
    // One device id per tab, made once ("Device ids"). A duplicated tab copies it: the 4002 rule makes it a new one.
    this.device = sessionStorage.getItem('pixiu.device') ?? this.newDevice();
    // This tab's cursor lives beside its messages, in memory. A new tab starts where this
    // browser's tabs got to, from the copy in localStorage, and shows what comes after
    // ("Where a web app keeps last_seq"); a running tab never reads that copy again.
    this.seedKey = `pixiu.cursor.${opts.user}`;
    const seed = JSON.parse(localStorage.getItem(this.seedKey) ?? '{}');
    this.lastSeq = seed.lastSeq ?? 0;
    this.epoch = seed.epoch ?? null;
    this.ids = new Set(); // of the messages shown
    this.ws = this.token = null;
    this.failures = 0; // failed attempts in a row: the back-off's exponent
    this.neverOpened = 0; // attempts in a row that never opened
    this.fastUntil = -Infinity; // until then the back-off is capped at 5 s (a restart, as a rule)
    this.last4002 = -Infinity;
    if (typeof addEventListener === 'function') addEventListener('online', () => this.soon());
    if (typeof document !== 'undefined') {
      document.addEventListener('visibilitychange', () => document.visibilityState === 'visible' && this.soon());
    }
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    if (this.ws !== null) this.drop(this.ws, 'stopped', 1000);
  }

  newDevice() {
    const id = crypto.randomUUID();
    sessionStorage.setItem('pixiu.device', id);
    return id;
  }

  /** Gets a token from the backend and when to refresh it, by the time since now, never by `exp` against this device's clock (point 7). */
  async newToken() {
    const got = await this.opts.getToken();
    const text = typeof got === 'string' ? got : got.token;
    const claims = claimsOf(text);
    const known = got.expires_in !== undefined || claims.iat !== undefined;
    // The lifetime by the issuer's clock; only a token with neither falls back on this device's clock.
    const lifeMs = 1000 * (got.expires_in ?? (claims.iat !== undefined ? claims.exp - claims.iat : claims.exp - Date.now() / 1000));
    const dueMs = Math.max(lifeMs / 2, Math.min(0.8 * lifeMs, lifeMs - 60_000));
    this.token = { text, at: moment(), dueMs: known ? dueMs : Math.max(dueMs, 60_000) };
  }

  async connect() {
    this.waiting = false;
    if (this.stopped) return;
    try {
      if (this.token === null || since(this.token.at) >= this.token.dueMs) await this.newToken();
    } catch {
      return this.retry(false); // the backend did not answer: back off
    }
    const q = new URLSearchParams({ token: this.token.text, device: this.device, last_seq: String(this.lastSeq) });
    if (this.epoch !== null) q.set('epoch', this.epoch);
    const ws = new WebSocket(`${this.opts.url}?${q}`);
    this.ws = ws;
    this.opened = false;
    this.acked = this.lastSeq;
    // A browser's WebSocket has no handshake timeout of its own ("A handshake that never ends").
    this.openTimer = setTimeout(() => this.drop(ws, 'not open in time'), this.opts.connectTimeoutMs);
    ws.onerror = () => {};
    ws.onclose = (ev) => this.closed(ws, ev.code, ev.reason);
    ws.onopen = () => {
      clearTimeout(this.openTimer);
      this.opened = true;
      this.openedAt = moment();
      this.neverOpened = 0;
      this.lastFrame = performance.now();
      this.pingAt = null;
      this.watchTimer = setInterval(() => this.watch(ws), Math.min(1000, this.opts.quietMs / 4));
      this.scheduleRefresh(ws);
      this.opts.onStatus?.('open');
    };
    ws.onmessage = (ev) => {
      this.lastFrame = performance.now(); // any frame is a sign of life, before any work on it
      this.handle(JSON.parse(ev.data));
    };
  }

  handle(f) {
    switch (f.t) {
      case 'welcome':
        if (this.epoch === null) this.epoch = f.epoch; // else a differing epoch is followed by a reset
        this.conn = f.conn; // quote it when reporting a problem
        break;
      case 'msg':
        if (f.epoch) this.epoch = f.epoch; // the first msg or gap after an epoch of null names it
        if (!this.ids.has(f.id)) {
          this.ids.add(f.id);
          if (this.ids.size > KEEP_IDS) this.ids.delete(this.ids.values().next().value);
          this.opts.onMessage?.(f);
        }
        this.processed(f.seq);
        break;
      case 'gap':
        if (f.stream) break; // about broadcasts
        if (f.epoch) this.epoch = f.epoch;
        // Only what lies past last_seq is news, and never a gap marked redelivered: seqs sent
        // before on this connection, or after a reset ones this device had under the old epoch.
        if (f.to > this.lastSeq && !f.redelivered) {
          this.opts.onGap?.({ from: Math.max(f.from, this.lastSeq + 1), to: f.to, reason: f.reason });
        }
        this.processed(f.to);
        break;
      case 'reset':
        if (f.stream) break;
        this.lastSeq = 0; // the inbox follows from seq 1; what you have comes again with its id
        this.acked = 0;
        this.epoch = f.epoch;
        return;
      case 'error':
        this.opts.onStatus?.('error', f); // e.g. a refresh refused: the 4001 at exp fetches a new token
        break;
    }
  }

  /** A msg or gap was processed: last_seq moves (never back), and an ack follows soon. */
  processed(seq) {
    if (seq > this.lastSeq) this.lastSeq = seq;
    clearTimeout(this.ackTimer);
    if (this.lastSeq - this.acked >= ACK_EVERY) this.ack();
    else this.ackTimer = setTimeout(() => this.ack(), ACK_QUIET_MS);
  }

  ack() {
    if (this.ws === null || !this.opened || this.lastSeq <= this.acked) return;
    this.ws.send(JSON.stringify(this.epoch === null ? { t: 'ack', seq: this.lastSeq } : { t: 'ack', seq: this.lastSeq, epoch: this.epoch }));
    this.acked = this.lastSeq;
    // Where a new tab of this browser will start.
    const seed = JSON.parse(localStorage.getItem(this.seedKey) ?? '{}');
    if (seed.epoch !== this.epoch || !(seed.lastSeq >= this.lastSeq)) {
      localStorage.setItem(this.seedKey, JSON.stringify({ lastSeq: this.lastSeq, epoch: this.epoch }));
    }
  }

  /** The application heartbeat: a ping after a quiet spell; drop when nothing at all came for the deadline since it ("Detecting a dead connection"). */
  watch(ws) {
    const t = performance.now();
    const pending = this.pingAt !== null && this.lastFrame < this.pingAt;
    if (pending && t - this.pingAt >= this.opts.deadlineMs) this.drop(ws, 'nothing received');
    else if (!pending && t - this.lastFrame >= this.opts.quietMs) {
      ws.send('{"t":"ping"}');
      this.pingAt = t;
    }
  }

  scheduleRefresh(ws) {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(async () => {
      try {
        await this.newToken();
      } catch {
        this.refreshTimer = setTimeout(() => this.scheduleRefresh(ws), 5000);
        return;
      }
      if (ws !== this.ws) return;
      ws.send(JSON.stringify({ t: 'refresh', token: this.token.text }));
      this.scheduleRefresh(ws); // the new token's own count
    }, Math.max(0, this.token.dueMs - since(this.token.at)));
  }

  /** Gives a socket up (not open in time, a dead downlink: as if it had closed 1006; or stopped). */
  drop(ws, why, code = 1006) {
    if (ws !== this.ws) return;
    this.closed(ws, code, why);
    ws.close(1000);
  }

  closed(ws, code, reason) {
    if (ws !== this.ws) return; // one given up already
    const opened = this.opened;
    this.ws = null;
    for (const timer of [this.openTimer, this.ackTimer, this.refreshTimer]) clearTimeout(timer);
    clearInterval(this.watchTimer);
    this.opts.onStatus?.('closed', { code, reason, opened });
    if (this.stopped) return;
    if (STOP_CODES.has(code)) {
      this.stopped = true;
      this.opts.onStatus?.('stopped', { code, reason });
      return;
    }
    if (code === 4001) this.token = null; // expired: a new one first
    if (code === 4002) {
      // Once, then a second 4002 within a minute: another tab has this id ("On 4002").
      if (performance.now() - this.last4002 < 60_000) this.device = this.newDevice();
      this.last4002 = performance.now();
    }
    if (opened && since(this.openedAt) >= 60_000) this.failures = 0;
    // The node stopping, or the node or network gone under an open connection: a restart, as a rule ("Coming back after a restart").
    if (code === 1001 || (code === 1006 && opened)) this.fastUntil = performance.now() + 60_000;
    if (!opened && ++this.neverOpened % 3 === 0) {
      this.token = null; // a fresh token, in case this one is the cause
      this.opts.onStatus?.('failing');
    }
    this.retry(code === 1001);
  }

  retry(after1001) {
    const cap = performance.now() < this.fastUntil ? 5_000 : 30_000;
    const step = Math.min(cap, 500 * 2 ** this.failures++);
    const wait = after1001 ? 200 + Math.random() * 1800 : step / 2 + (Math.random() * step) / 2;
    this.waiting = true;
    this.retryTimer = setTimeout(() => this.connect(), wait);
  }

  /** The network is back, or the page visible again: while waiting, try now (within a second). */
  soon() {
    if (this.stopped || !this.waiting) return;
    clearTimeout(this.retryTimer);
    this.failures = 0;
    this.retryTimer = setTimeout(() => this.connect(), Math.random() * 1000);
  }
}
