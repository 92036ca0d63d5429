// A browser client of Pixiu's WebSocket protocol, written from docs/protocol.md ("A client
// in one screen", points 1-9) in plain JavaScript with no dependencies: the browser's
// WebSocket, sessionStorage, localStorage and performance.now. Per tab it keeps the
// last_seq and epoch of the messages it shows, shows each message once, acks, follows
// gaps and resets, refreshes its token, watches the downlink, and reconnects with a
// back-off. It keeps last_bseq as it keeps last_seq and shows each broadcast once, and
// follows channels, each from the id of its last publication shown, subscribing again
// after each reconnect from where it left off. test/examples/browser-client.test.ts,
// browser-client-streams.test.ts (broadcasts and channels) and browser-client-4002.test.ts
// (the 4002 rule) run it.
//
//   import { PixiuClient } from './pixiu-client.js';
//   const client = new PixiuClient({
//     url: 'wss://chat.example.com/v1/connect',
//     user: 'alice',                                   // the token's sub
//     getToken: async () => (await fetch('/pixiu-token')).json(), // {token, expires_in?}
//     onMessage: (msg) => show(msg),                   // each message once, in seq order
//     onBroadcast: (b) => banner(b),                   // each bcast once: {bseq, id, type, ts, data}
//     onPublication: (p) => live(p),                   // each pub once: {channel, id, type, ts, data}
//     // What is gone: {from, to, reason}, seqs of the inbox; {stream: 'broadcast', from, to},
//     // the broadcasts after `from` and before `to`; {stream: 'broadcast', reset: true, from},
//     // the broadcast stream lost since `from` (an unknown number missed); {stream: 'channel',
//     // channel, from, to}, publications its history (100) trimmed before this tab got them.
//     onGap: (gap) => notice(gap),
//     onStatus: (status, detail) => badge(status),     // open, closed, failing (none opened for failingAfterMs, 30 s), stopped
//     // Optional, 10 s each: the connect timeout, the quiet spell before a ping, and how
//     // long after the ping nothing at all may come. The 10 s figures assume a round trip
//     // well under 10 s; on links with round trips of seconds (congested cellular,
//     // satellite) give longer ones, e.g. 30 s for the timeout and the deadline, or
//     // scale them with the round trip you measure (a ping to its pong): docs/protocol.md,
//     // "A handshake that never ends" and "Detecting a dead connection".
//     connectTimeoutMs: 10_000, quietMs: 10_000, deadlineMs: 10_000,
//   });
//   client.start();
//   client.subscribe('live.s1.chat');                  // a channel the token's `channels` allow
//   client.unsubscribe('live.s1.chat');

const ACK_QUIET_MS = 200; // ack once no message came for this long…
const ACK_EVERY = 50; // …or every 50 messages: well inside the window (100)…
const ACK_MAX_MS = 2000; // …or 2 s after the first unacked message while messages keep coming: well inside the ack timeout (10 s)
const KEEP_IDS = 10_000; // ids kept to show nothing twice after a reset (PIXIU_INBOX_CAP)
const STOP_CODES = new Set([1002, 1007, 1009, 4003]); // "fix the client": never reconnect
const KEEP_BCAST_IDS = 10_000; // broadcast ids kept to show none twice after a reset (PIXIU_BROADCAST_STREAM_CAP)
const SUB_GROUP = 63; // subs sent before a ping whose pong lets the next group go: at most 64 frames may wait

/** A moment, on both clocks. */
const moment = () => ({ mono: performance.now(), wall: Date.now() });

/** Ms since a {@link moment}: the larger of the two clocks' differences (a monotonic clock may stand still while the machine sleeps). */
const since = (then) => Math.max(performance.now() - then.mono, Date.now() - then.wall);

/** True when stream id `a` (a `bseq`, a `pub` id: `<ms>-<n>`) is after `b`: both parts compared as whole numbers, never as strings ("Broadcasts"). */
function isAfter(a, b) {
  const [am, an] = a.split('-').map(BigInt);
  const [bm, bn] = b.split('-').map(BigInt);
  return am > bm || (am === bm && an > bn);
}

/** Adds `id` to `ids`, the oldest dropped past `keep`; false when it was there (shown already). */
function remember(ids, id, keep) {
  if (ids.has(id)) return false;
  ids.add(id);
  if (ids.size > keep) ids.delete(ids.values().next().value);
  return true;
}

/** A JWT's claims: its middle part, base64url of UTF-8 JSON. */
function claimsOf(token) {
  const b64 = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))));
}

export class PixiuClient {
  constructor(opts) {
    // 10 s each assume a round trip well under 10 s (see the usage above to change them).
    this.opts = { connectTimeoutMs: 10_000, quietMs: 10_000, deadlineMs: 10_000, failingAfterMs: 30_000, ...opts };
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
    // Broadcasts likewise (point 5): last_bseq of this tab, a new one's from the seed, else welcome's.
    this.lastBseq = seed.lastBseq ?? null;
    this.bcastIds = new Set(); // of the broadcasts shown
    this.channels = new Map(); // channel → {since}: the id of its last pub shown, else its `subscribed`'s (point 6)
    this.ws = this.token = null;
    this.failures = 0; // failed attempts in a row: the back-off's exponent
    this.notOpenSince = null; // the start of the first attempt in a row that has not opened
    this.fastUntil = -Infinity; // until then the back-off is capped at 5 s (a restart, as a rule)
    this.last4002 = null; // the moment of the last 4002 that counted ("On 4002" 3)
    this.gaveUp = []; // the moments this client gave up a handshake of this device (point 9)
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
    this.notOpenSince ??= moment();
    try {
      if (this.token === null || since(this.token.at) >= this.token.dueMs) await this.newToken();
    } catch {
      this.notOpened();
      return this.retry(false); // the backend or the network did not answer: a failed attempt, back off
    }
    const q = new URLSearchParams({ token: this.token.text, device: this.device, last_seq: String(this.lastSeq) });
    if (this.epoch !== null) q.set('epoch', this.epoch);
    if (this.lastBseq !== null) q.set('last_bseq', this.lastBseq);
    const ws = new WebSocket(`${this.opts.url}?${q}`);
    this.ws = ws;
    this.opened = this.welcomed = false;
    this.acked = this.lastSeq;
    // A browser's WebSocket has no handshake timeout of its own ("A handshake that never ends").
    this.openTimer = setTimeout(() => {
      this.gaveUp.push(moment()); // it may still reach the node late: one 4002 of ours
      this.drop(ws, 'not open in time');
    }, this.opts.connectTimeoutMs);
    ws.onerror = () => {};
    ws.onclose = (ev) => this.closed(ws, ev.code, ev.reason);
    ws.onopen = () => {
      clearTimeout(this.openTimer);
      this.opened = true;
      this.openedAt = moment();
      this.notOpenSince = null;
      this.lastFrame = performance.now();
      this.pingAt = null;
      this.pings = this.pongs = this.subsDoneAt = 0; // pings sent, pongs come, and the pong of the last group of subs
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
        if (f.bseq !== undefined) this.lastBseq = f.bseq; // only when connected without last_bseq
        this.welcomed = true;
        this.subQueue = [...this.channels.keys()]; // each again, from where it left off
        this.sendSubs();
        break;
      case 'msg':
        if (f.epoch) this.epoch = f.epoch; // the first msg or gap after an epoch of null names it
        if (remember(this.ids, f.id, KEEP_IDS)) this.opts.onMessage?.(f);
        this.processed(f.seq);
        break;
      case 'bcast':
        if (remember(this.bcastIds, f.id, KEEP_BCAST_IDS)) this.opts.onBroadcast?.(f);
        this.lastBseq = f.bseq;
        clearTimeout(this.seedTimer); // the seed follows once the broadcasts pause
        this.seedTimer = setTimeout(() => this.seed(), ACK_QUIET_MS);
        break;
      case 'pub': {
        const channel = this.channels.get(f.channel); // none after an unsubscribe
        if (channel === undefined || (channel.since !== null && !isAfter(f.id, channel.since))) break;
        channel.since = f.id;
        this.opts.onPublication?.(f);
        break;
      }
      case 'subscribed': {
        const channel = this.channels.get(f.channel);
        if (channel !== undefined) channel.since = f.since; // where this connection's pubs of it start
        break;
      }
      case 'pong':
        if (++this.pongs === this.subsDoneAt) this.sendSubs(); // every sub before it was answered
        break;
      case 'gap':
        // Broadcasts, or a followed channel's publications, after `from` and before `to` (both
        // exclusive): gone before this tab got them, also from 0-0 (protocol.md); `since` stays.
        if (f.stream) {
          if (f.stream !== 'channel' || this.channels.has(f.channel)) this.opts.onGap?.({ stream: f.stream, ...(f.channel && { channel: f.channel }), from: f.from, to: f.to });
          break;
        }
        if (f.epoch) this.epoch = f.epoch;
        // Only what lies past last_seq is news, and never a gap marked redelivered: seqs sent
        // before on this connection, or after a reset ones this device had under the old epoch.
        if (f.to > this.lastSeq && !f.redelivered) {
          this.opts.onGap?.({ from: Math.max(f.from, this.lastSeq + 1), to: f.to, reason: f.reason });
        }
        this.processed(f.to);
        break;
      case 'reset':
        if (f.stream) {
          // The stream was lost since last_bseq: keep 0-0 (not the frame's bseq, the end of
          // what follows) until a bcast; the retained ones follow, matched by id.
          this.opts.onGap?.({ stream: f.stream, reset: true, from: this.lastBseq });
          this.lastBseq = '0-0';
          return;
        }
        this.lastSeq = 0; // the inbox follows from seq 1; what you have comes again with its id
        this.acked = 0;
        this.epoch = f.epoch;
        return;
      case 'error':
        if (f.ref?.t === 'sub') this.subRefused(f.ref.channel, f.code);
        this.opts.onStatus?.('error', f); // e.g. a refresh refused: the 4001 at exp fetches a new token
        break;
    }
  }

  /** Follows `channel` (point 6): its publications after `since` (default: from the `sub` on) come to onPublication once each, across reconnects too. */
  subscribe(channel, since = null) {
    if (this.channels.has(channel)) return;
    this.channels.set(channel, { since });
    if (this.welcomed) {
      this.subQueue.push(channel);
      this.sendSubs();
    }
  }

  unsubscribe(channel) {
    if (this.channels.delete(channel) && this.welcomed) this.ws.send(JSON.stringify({ t: 'unsub', channel }));
  }

  /** Sends the subs queued, each with its channel's `since`, in groups of 63 with a ping after each: the next group goes when that pong comes ("Client → server"). */
  sendSubs() {
    if (this.pongs < this.subsDoneAt || this.subQueue.length === 0) return;
    for (const name of this.subQueue.splice(0, SUB_GROUP)) {
      const channel = this.channels.get(name);
      if (channel !== undefined) this.ws.send(JSON.stringify({ t: 'sub', channel: name, ...(channel.since === null ? {} : { since: channel.since }) }));
    }
    this.ws.send('{"t":"ping"}');
    this.subsDoneAt = ++this.pings;
  }

  /** A sub refused: Redis unreachable (UNAVAILABLE) is tried again in a second, from where the channel got to; any other refusal (FORBIDDEN, also a refresh that dropped it; RATE_LIMITED past 100 channels) ends following it. */
  subRefused(name, code) {
    if (code !== 'UNAVAILABLE') return void this.channels.delete(name);
    const ws = this.ws;
    setTimeout(() => {
      if (ws !== this.ws || !this.channels.has(name)) return; // a reconnect sends it anyway
      this.subQueue.push(name);
      this.sendSubs();
    }, 1000);
  }

  /** A msg or gap was processed: last_seq moves (never back), and an ack follows soon. */
  processed(seq) {
    if (this.lastSeq <= this.acked) this.unackedSince = performance.now(); // the first unacked: ACK_MAX_MS counts from it
    if (seq > this.lastSeq) this.lastSeq = seq;
    clearTimeout(this.ackTimer);
    if (this.lastSeq - this.acked >= ACK_EVERY || performance.now() - this.unackedSince >= ACK_MAX_MS) this.ack();
    else this.ackTimer = setTimeout(() => this.ack(), ACK_QUIET_MS);
  }

  ack() {
    if (this.ws === null || !this.opened || this.lastSeq <= this.acked) return;
    this.ws.send(JSON.stringify(this.epoch === null ? { t: 'ack', seq: this.lastSeq } : { t: 'ack', seq: this.lastSeq, epoch: this.epoch }));
    this.acked = this.lastSeq;
    this.seed();
  }

  /** Where a new tab of this browser will start: this tab's last_seq and epoch once acked, and its last_bseq when newer than the copy's. */
  seed() {
    const seed = JSON.parse(localStorage.getItem(this.seedKey) ?? '{}');
    const next = { ...seed };
    if (this.acked > 0 && (seed.epoch !== this.epoch || !(seed.lastSeq >= this.acked))) Object.assign(next, { lastSeq: this.acked, epoch: this.epoch });
    if (this.lastBseq !== null && (seed.lastBseq === undefined || isAfter(this.lastBseq, seed.lastBseq))) next.lastBseq = this.lastBseq;
    if (next.lastSeq !== seed.lastSeq || next.epoch !== seed.epoch || next.lastBseq !== seed.lastBseq) localStorage.setItem(this.seedKey, JSON.stringify(next));
  }

  /** The application heartbeat: a ping after a quiet spell; drop when nothing at all came for the deadline since it ("Detecting a dead connection"). */
  watch(ws) {
    const t = performance.now();
    const pending = this.pingAt !== null && this.lastFrame < this.pingAt;
    if (pending && t - this.pingAt >= this.opts.deadlineMs) this.drop(ws, 'nothing received');
    else if (!pending && t - this.lastFrame >= this.opts.quietMs) {
      ws.send('{"t":"ping"}');
      this.pings += 1;
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
    this.welcomed = false; // subscribe() and unsubscribe() send nothing until the next welcome
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
      // "On 4002" 3: a second 4002 within a minute means another tab has this id, counting
      // only those our own handshakes do not explain: each one of this device given up
      // in the minute before (point 9's timeout) may reach the node late and close this
      // connection 4002, once ("A handshake that never ends"), so it explains one 4002.
      this.gaveUp = this.gaveUp.filter((at) => since(at) < 60_000);
      if (this.gaveUp.length > 0) this.gaveUp.shift(); // explained: reconnect as after a first one
      else {
        if (this.last4002 !== null && since(this.last4002) < 60_000) {
          this.device = this.newDevice();
          this.gaveUp = []; // handshakes of the old id close no connection of the new one
        }
        this.last4002 = moment();
      }
    }
    if (opened && since(this.openedAt) >= 60_000) this.failures = 0;
    // The node stopping, or the node or network gone under an open connection: a restart, as a rule ("Coming back after a restart").
    if (code === 1001 || (code === 1006 && opened)) this.fastUntil = performance.now() + 60_000;
    if (!opened) this.notOpened();
    this.retry(code === 1001);
  }

  /** An attempt that did not open: the first once none has opened for failingAfterMs says "failing" and fetches a fresh token, in case this one is the cause ("Coming back after a restart"). */
  notOpened() {
    if (this.failing === this.notOpenSince || since(this.notOpenSince) < this.opts.failingAfterMs) return;
    this.failing = this.notOpenSince; // once in this row
    this.token = null;
    this.opts.onStatus?.('failing');
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
