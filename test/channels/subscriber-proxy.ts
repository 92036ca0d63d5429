/**
 * A service whose node reaches Redis through test/harness/lag-proxy.ts, which can
 * delay or cut the node's subscriber connection (`pixiu:bus:<node>`, channels and the
 * node bus) while its command connection works on: the channel tests of what a
 * lagging or lost Pub/Sub connection does (DESIGN.md §8).
 */
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { fileRedis } from '../harness/file-redis.js';
import { LagProxy } from '../harness/lag-proxy.js';
import { startGateway, type GatewayFixture } from '../gateway/gateway-fixture.js';
import type { Logger } from '../../src/logger.js';

/** What {@link subscriberProxyForFile} starts. */
export interface ProxiedGateway {
  readonly gw: GatewayFixture;
  /** In front of Redis; matches the node's subscriber connection. */
  readonly proxy: LagProxy;
  /** A connection of the test's own to Redis itself (not through the proxy). */
  readonly probe: Redis;
}

/**
 * For the tests of one file: a private redis-server, the proxy in front of it and a
 * gateway through it, started before them and stopped after them. Answers a getter
 * (valid inside a test).
 * @param channelHistory PIXIU_CHANNEL_HISTORY
 * @param logger the gateway's log; none: silent
 */
export function subscriberProxyForFile(channelHistory: number, logger?: Logger): () => ProxiedGateway {
  let started: ProxiedGateway | undefined;
  fileRedis(async ({ redis, cleanup }) => {
    const proxy = await LagProxy.start({ host: '127.0.0.1', port: redis.port }, 'pixiu:bus:');
    cleanup.after(() => proxy.close());
    const gw = await startGateway(cleanup, { redisUrl: proxy.url, storeDurability: 'relaxed', channelHistory: String(channelHistory) }, logger);
    const probe = new Redis(redis.url);
    cleanup.after(() => probe.quit());
    started = { gw, proxy, probe };
  });
  return () => {
    assert.ok(started, 'the gateway is started before the tests');
    return started;
  };
}
