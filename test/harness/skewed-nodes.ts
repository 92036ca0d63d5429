/**
 * Two `pixiu serve` nodes on one fresh Redis, node B's machine clock off by a given
 * offset (test/harness/clock-offset.mjs: `Date.now()` reads it; a node on another
 * machine whose NTP has drifted), both stopped with `cleanup`. For the tests of what
 * nodes whose clocks differ agree on (test/rooms/clock-skew.test.ts,
 * test/cluster/get-by-id-skew.test.ts).
 */
import { JWT_SECRET } from '../gateway/gateway-fixture.js';
import { cliEntry, PixiuClient, spawnListening, tempDataDir, type CleanupContext } from './pixiu-server.js';
import { RedisServer } from './redis-server.js';

/**
 * Starts nodes A (this machine's clock) and B (its clock `offsetMs` from A's: positive
 * ahead, negative behind), one after the other, each with its own data dir.
 * @returns their API clients, with `token`
 */
export async function skewedNodes(cleanup: CleanupContext, token: string, offsetMs: number): Promise<{ a: PixiuClient; b: PixiuClient }> {
  const redis = await RedisServer.start();
  cleanup.after(() => redis.destroy());
  const env = async (): Promise<Record<string, string>> => ({
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(cleanup), PIXIU_PORT: '0', PIXIU_API_TOKEN: token,
    PIXIU_JWT_SECRET: JWT_SECRET, PIXIU_STORE_DURABILITY: 'relaxed',
  });
  const preload = new URL('./clock-offset.mjs', import.meta.url).pathname;
  // cliEntry(): the build when current (as spawnServe runs it), else the sources through tsx.
  const a = await spawnListening([...cliEntry(), 'serve'], await env(), cleanup, 'pixiu listening', { tsx: false });
  const b = await spawnListening(['--import', preload, ...cliEntry(), 'serve'], { ...(await env()), CLOCK_OFFSET_MS: String(offsetMs) }, cleanup, 'pixiu listening', { tsx: false });
  return { a: new PixiuClient(a.url, token), b: new PixiuClient(b.url, token) };
}
