/**
 * A room message's `ts` is Redis's clock (Rooms.now), while the store reads and sweeps
 * by the node's own clock. Its retention counts from the later of the two
 * (src/store/record.ts `prepareRecord`). Counted from `ts` alone, on a node whose clock
 * ran ahead of Redis's by more than the message's ttl, a room message answered 201 was
 * stored already expired: no member could ever read it (a gap). A user message with
 * the same ttl through the same node is the control.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanupList, cliEntry, PixiuClient, spawnListening, tempDataDir } from '../harness/pixiu-server.js';
import { RedisServer } from '../harness/redis-server.js';
import { JWT_SECRET } from '../gateway/gateway-fixture.js';
import { addMembers } from './room-fixture.js';

const TOKEN = 'room-ttl-clock-token-0123456789';
/** The node's clock runs this far ahead of Redis's (same machine: Redis has the real time). */
const SKEW_MS = 3000;

test('a room message with a ttl shorter than the node/Redis clock skew is readable after its 201', { timeout: 60_000 }, async (t) => {
  const c = cleanupList();
  t.after(() => c.run());
  const redis = await RedisServer.start();
  c.after(() => redis.destroy());
  const preload = new URL('../harness/clock-offset.mjs', import.meta.url).pathname;
  const node = await spawnListening(['--import', preload, ...cliEntry(), 'serve'], {
    PIXIU_REDIS_URL: redis.url, PIXIU_DATA_DIR: await tempDataDir(c), PIXIU_PORT: '0', PIXIU_API_TOKEN: TOKEN,
    PIXIU_JWT_SECRET: JWT_SECRET, CLOCK_OFFSET_MS: String(SKEW_MS),
  }, c, 'pixiu listening', { tsx: false });
  const api = new PixiuClient(node.url, TOKEN);
  await addMembers(api, 'r1', ['alice']);

  const user = await api.post('/v1/messages', { to: 'bob', type: 't', data: { n: 1 }, ttl: 10 });
  assert.equal(user.status, 201, user.text);
  const room = await api.post('/v1/messages', { room: 'r1', type: 't', data: { n: 2 }, ttl: 2 });
  assert.equal(room.status, 201, room.text);
  const roomId = (room.body as { id: string }).id;

  const bobPage = await api.get('/v1/users/bob/messages');
  assert.equal((bobPage.body as { messages: unknown[] }).messages.length, 1, bobPage.text);
  const alicePage = await api.get('/v1/users/alice/messages');
  const msgs = (alicePage.body as { messages: { id: string }[] }).messages;
  const byId = await api.get(`/v1/messages/${roomId}`);
  assert.deepEqual({ history: msgs.map((m) => m.id), get: byId.status }, { history: [roomId], get: 200 },
    `room message ${roomId} (ttl 2 s) answered 201 but unreadable at once: ${alicePage.text} / GET ${byId.status}`);
});
