/**
 * The page and site of test/examples: docs/examples/pixiu-client.js run in Node as a
 * page would run it — `ws` stands in for the browser's WebSocket (globalThis.WebSocket)
 * and in-memory stores for sessionStorage and localStorage; everything else is the
 * example's own code — against a real service and Redis ({@link startSite}), its tokens
 * minted as README tells an app backend to, with jose and the data dir's generated
 * jwt-secret, and its network a TCP proxy a test can cut ({@link link}). Each test file
 * runs in a process of its own, with a site of its own.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Duplex } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import { SignJWT } from 'jose';
import { WebSocket } from 'ws';
import type { Redis } from 'ioredis';
import type { Inbox } from '../../src/inbox/inbox.js';
import { openInbox } from '../harness/checks.js';
import { startInProcess, tempDataDir, type CleanupContext, type CleanupList, type InProcessServer } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { REPO_ROOT } from '../harness/test-build.js';

/** What a `msg` frame gives the page. */
export interface Msg { seq: number; id: string; data: unknown }
/** What a `bcast` frame gives the page. */
export interface Bcast { bseq: string; id: string; data: unknown }
/** What a `pub` frame gives the page. */
export interface Pub { channel: string; id: string; data: unknown }
/** What the page's onGap is told: seqs of the inbox, broadcasts (a gap, or the stream lost since `from`), or a channel's publications. */
export type Gap = { from: number; to: number; reason: string } | { stream: 'broadcast'; from: string | null; to?: string; reset?: true }
  | { stream: 'channel'; channel: string; from: string; to: string };
/** The example's options and the state the test reads (docs/examples/pixiu-client.js). */
export interface ClientOptions {
  url: string;
  user: string;
  getToken: () => Promise<{ token: string; expires_in?: number } | string>;
  onMessage?: (msg: Msg) => void;
  onBroadcast?: (bcast: Bcast) => void;
  onPublication?: (pub: Pub) => void;
  onGap?: (gap: Gap) => void;
  onStatus?: (status: string, detail?: Record<string, unknown>) => void;
  connectTimeoutMs?: number;
  quietMs?: number;
  deadlineMs?: number;
  failingAfterMs?: number;
}
export interface Client {
  start(): void;
  stop(): void;
  subscribe(channel: string, since?: string): void;
  unsubscribe(channel: string): void;
  readonly lastSeq: number;
  readonly lastBseq: string | null;
  readonly channels: ReadonlyMap<string, { since: string | null }>;
  readonly epoch: string | null;
  readonly device: string;
  readonly conn: string | undefined;
}
export type ClientClass = new (opts: ClientOptions) => Client;

/** A browser's Storage, in memory. */
export class MemoryStorage {
  readonly #items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.#items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.#items.set(key, String(value));
  }
  removeItem(key: string): void {
    this.#items.delete(key);
  }
}

/** The inbox keeps 20 messages, the broadcast stream 5 broadcasts: a test trims either past its cap in a few posts. */
export const SETTINGS = { inboxCap: '20', broadcastStreamCap: '5', channelHistory: '5', storeDurability: 'relaxed', redisPrefix: 'web:' };

/** The test file's service, Redis and data dir ({@link startSite}). */
export interface Site {
  readonly cleanup: CleanupList;
  readonly redis: RedisServer;
  readonly dataDir: string;
  /** The node pages connect to: replaced by {@link startNode}. */
  node: InProcessServer;
  /** The node's inboxes, to read the ack cursors it stored. */
  readonly inbox: Inbox;
  /** The test's Redis, to lose a user's inbox or the broadcast stream. */
  readonly raw: Redis;
  /** The server's end of each socket upgraded by the current node, in order. */
  serverSockets: Duplex[];
  readonly PixiuClient: ClientClass;
}

export let site: Site;

/** Starts the service on `redis` and `dataDir` (on `port`); `serverSockets` gathers the server's end of each socket it upgrades. */
async function serve(cleanup: CleanupList, redis: RedisServer, dataDir: string, port: string): Promise<{ node: InProcessServer; serverSockets: Duplex[] }> {
  const node = await startInProcess(cleanup, { redisUrl: redis.url, dataDir, port, ...SETTINGS });
  const serverSockets: Duplex[] = [];
  node.service.app.server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => serverSockets.push(socket));
  return { node, serverSockets };
}

/** Starts the service again on the site's Redis and data dir (on `port`, to come back where it was), as `site.node`. */
export async function startNode(port = '0'): Promise<InProcessServer> {
  Object.assign(site, await serve(site.cleanup, site.redis, site.dataDir, port));
  return site.node;
}

/** Starts a Redis, a data dir and a node (stopped by `cleanup`), and loads the example with `ws` as its WebSocket: the file's {@link site}. */
export async function startSite(cleanup: CleanupList): Promise<Site> {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const dataDir = await tempDataDir(cleanup);
  const served = await serve(cleanup, redis, dataDir, '0');
  const { inbox, redis: raw } = await openInbox(cleanup, redis.url, SETTINGS.redisPrefix);
  Object.assign(globalThis, { WebSocket });
  const { PixiuClient } = await import(pathToFileURL(path.join(REPO_ROOT, 'docs/examples/pixiu-client.js')).href) as { PixiuClient: ClientClass };
  site = { cleanup, redis, dataDir, ...served, inbox, raw, PixiuClient };
  return site;
}

/** A client token as README tells a backend to mint one: HS256 with the text of the data dir's jwt-secret, its newline trimmed; `channels` its channel patterns. */
export async function mint(user: string, ttlSec = 900, channels?: string[]): Promise<string> {
  const key = new TextEncoder().encode(readFileSync(path.join(site.dataDir, 'secrets', 'jwt-secret'), 'utf8').trim());
  const iat = Math.floor(Date.now() / 1000);
  return new SignJWT(channels === undefined ? {} : { channels }).setProtectedHeader({ alg: 'HS256' }).setSubject(user).setIssuedAt(iat).setExpirationTime(iat + ttlSec).sign(key);
}

/** What one page saw: its messages, broadcasts, publications, gaps, statuses and token fetches. */
export interface Page {
  readonly client: Client;
  readonly msgs: Msg[];
  readonly bcasts: Bcast[];
  readonly pubs: Pub[];
  readonly gaps: Gap[];
  readonly statuses: Array<[string, Record<string, unknown> | undefined]>;
  tokens: number;
}

/**
 * A new tab of a page: its `session` storage (its device id; fresh by default: a
 * duplicated tab passes a copy), the browser's `local` storage, the example started
 * against `url` (the node's, by default); stopped when the test ends. The example reads
 * the storage globals as it runs: the pages open at once share `local`, and the 4002
 * rule writes a new device id to the last page's sessionStorage (tests read the id from
 * `client.device`). Its tokens allow the channel patterns `channels`.
 */
export function openPage(
  t: CleanupContext, user: string,
  opts: Partial<ClientOptions> & { local?: MemoryStorage; session?: MemoryStorage; ttlSec?: number; channels?: string[] } = {},
): Page {
  Object.assign(globalThis, { sessionStorage: opts.session ?? new MemoryStorage(), localStorage: opts.local ?? new MemoryStorage() });
  const page: Page = { client: undefined as unknown as Client, msgs: [], bcasts: [], pubs: [], gaps: [], statuses: [], tokens: 0 };
  const client = new site.PixiuClient({
    url: `${site.node.service.url.replace(/^http/, 'ws')}/v1/connect`,
    user,
    getToken: async () => {
      page.tokens += 1;
      return { token: await mint(user, opts.ttlSec, opts.channels) };
    },
    onMessage: (m) => page.msgs.push(m),
    onBroadcast: (b) => page.bcasts.push(b),
    onPublication: (p) => page.pubs.push(p),
    onGap: (g) => page.gaps.push(g),
    onStatus: (s, d) => page.statuses.push([s, d]),
    ...opts,
  });
  Object.assign(page, { client });
  t.after(() => client.stop());
  client.start();
  return page;
}

export const opens = (page: Page): number => page.statuses.filter(([s]) => s === 'open').length;
export const closes = (page: Page): Array<Record<string, unknown> | undefined> => page.statuses.filter(([s]) => s === 'closed').map(([, d]) => d);

/** The page's network: a TCP proxy to the node, for a page's `url`. */
export interface Link {
  readonly url: string;
  /** Drops the connections open through it and refuses new ones, until {@link up}. */
  down(): void;
  up(): void;
}

/** A {@link Link} whose downlink carries at most `bytesPerSecond` (a slow mobile link). */
export async function link(t: CleanupContext, bytesPerSecond = Infinity): Promise<Link> {
  const { port } = new URL(site.node.service.url);
  const open = new Set<() => void>();
  let isUp = true;
  const proxy = net.createServer((client) => {
    if (!isUp) return void client.destroy();
    const upstream = net.connect(Number(port), '127.0.0.1');
    client.pipe(upstream);
    const queue: Buffer[] = [];
    upstream.on('data', (chunk: Buffer) => queue.push(chunk));
    // Every 50 ms, a twentieth of a second's bytes.
    const timer = setInterval(() => {
      for (let budget = bytesPerSecond / 20; budget > 0 && queue.length > 0;) {
        const head = queue[0] as Buffer;
        client.write(head.subarray(0, budget));
        if (head.length <= budget) queue.shift();
        else queue[0] = head.subarray(budget);
        budget -= head.length;
      }
    }, 50);
    const end = (): void => {
      clearInterval(timer);
      open.delete(end);
      client.destroy();
      upstream.destroy();
    };
    open.add(end);
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const end of open) end();
    return new Promise((resolve) => proxy.close(resolve));
  });
  return {
    url: `ws://127.0.0.1:${(proxy.address() as net.AddressInfo).port}/v1/connect`,
    down: () => {
      isUp = false;
      for (const end of open) end();
    },
    up: () => { isUp = true; },
  };
}
