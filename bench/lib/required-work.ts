/**
 * The required-work server of `bench:ingest`'s single-message case: one plain
 * implementation of the work DESIGN.md requires of a `POST /v1/messages`, and nothing
 * else, in its own process (a reference, not a bound: Pixiu, with its write slots and
 * tick pipeline, has been faster in some runs). Where the bare
 * fastify route (bare-fastify.ts) shows what HTTP alone costs, this shows what the
 * required work costs, so that the bench can tell Pixiu's own overhead from the price
 * of the guarantees:
 *
 * - a fastify route with a JSON schema for the body (additional properties refused) and
 *   for the 201 answer, and a constant-time compare of the bearer token (§7, §10);
 * - the partition `fnv1a32(client_msg_id) % 8` (§3, src/store/route.ts) and a lookup of
 *   the `client_msg_id` in that partition's idempotency index (`getSync`, as Pixiu);
 * - the record and the index entry put with a group commit per partition: the puts
 *   that arrive while the partition's write is in flight go into its next `batch()`,
 *   written with `sync: true`, so the answer waits for the fsync (§3);
 * - then the inbox append, `append-13.lua` by EVALSHA on an auto-pipelining ioredis
 *   client (§4), and the 201 with the seq.
 *
 * None of Pixiu's limits, budgets, metrics, logging, retries, expiry or recovery; no
 * tick pipeline or write slots. Environment: REQUIRED_WORK_REDIS_URL, REQUIRED_WORK_DATA_DIR,
 * REQUIRED_WORK_API_TOKEN, REQUIRED_WORK_PORT (default 0). Prints `{"msg": "required work listening", "url": …}` once it listens on
 * 127.0.0.1 (port 0: any free one) and exits on SIGTERM. Run by bench/ingest.ts.
 */
import { timingSafeEqual } from 'node:crypto';
import path from 'node:path';
import Fastify from 'fastify';
import { ClassicLevel } from 'classic-level';
import { Redis } from 'ioredis';
import { fnv1a32 } from '../../src/store/route.js';
import { INBOX_SCRIPTS } from '../../src/inbox/scripts.js';
import { scriptSource } from '../../src/redis/scripts.js';
import { newEpoch } from '../../src/inbox/codec.js';
import { SETTINGS } from '../../src/config/settings.js';

/** DESIGN.md §10's defaults: store partitions, inbox cap; the inbox keys' retention grace, ms. */
const PARTITIONS = 8;
const CAP = '10000';
/** The append script's ARGV[11], most devices with a cursor per user: the default. */
const DEVICE_CURSORS = String(SETTINGS.maxDeviceCursors.default);
const DAY_MS = 86_400_000;

/** One partition: its database, the puts waiting for its next write, its counter. */
interface Partition {
  readonly db: ClassicLevel<Buffer, Buffer>;
  waiting: { key: Buffer; value: Buffer; indexKey: Buffer; done: () => void; failed: (err: unknown) => void }[];
  writing: boolean;
  counter: number;
}

/** Writes what waits, one `batch()` at a time per partition (the group commit, DESIGN.md §3). */
function commit(p: Partition): void {
  if (p.writing || p.waiting.length === 0) return;
  const puts = p.waiting;
  p.waiting = [];
  p.writing = true;
  const batch = p.db.batch();
  for (const put of puts) batch.put(put.key, put.value).put(put.indexKey, put.key);
  batch.write({ sync: true }).then(() => {
    p.writing = false;
    for (const put of puts) put.done();
    commit(p);
  }, (err: unknown) => {
    // A failed write fails its puts (500), and the partition writes on.
    p.writing = false;
    for (const put of puts) put.failed(err);
    commit(p);
  });
}

const dataDir = process.env.REQUIRED_WORK_DATA_DIR ?? '';
const token = Buffer.from(`Bearer ${process.env.REQUIRED_WORK_API_TOKEN ?? ''}`);
const partitions: Partition[] = [];
for (let i = 0; i < PARTITIONS; i++) {
  const db = new ClassicLevel<Buffer, Buffer>(path.join(dataDir, String(i)), { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open();
  partitions.push({ db, waiting: [], writing: false, counter: 0 });
}
const redis = new Redis(process.env.REQUIRED_WORK_REDIS_URL ?? '', { enableAutoPipelining: true, keyPrefix: '' });
const append = INBOX_SCRIPTS.append;
redis.defineCommand('requiredAppend', { lua: scriptSource(append), numberOfKeys: append.numberOfKeys });
const appendScript = (redis as unknown as { requiredAppend(...args: string[]): Promise<[number, string]> }).requiredAppend.bind(redis);

const body = {
  type: 'object', additionalProperties: false, required: ['to', 'type', 'data', 'client_msg_id'],
  properties: {
    to: { type: 'string', minLength: 1, maxLength: 128 },
    type: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,64}$' },
    data: {},
    client_msg_id: { type: 'string', pattern: '^[\\x20-\\x7e]{1,128}$' },
    from: { type: 'string', minLength: 1, maxLength: 128 },
    ttl: { type: 'integer', minimum: 1, maximum: 30 * 86_400 },
  },
} as const;
const answer = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    recipients: { type: 'array', items: { type: 'object', properties: { user: { type: 'string' }, seq: { type: 'integer' } } } },
    duplicate: { type: 'boolean' },
  },
} as const;

/** A single message's body, as the schema above lets it through. */
interface Body { to: string; type: string; data: unknown; client_msg_id: string; from?: string; ttl?: number }

const app = Fastify({ logger: false });
app.post<{ Body: Body }>('/v1/messages', { schema: { body, response: { 200: answer, 201: answer } } }, async (req, reply) => {
  const given = Buffer.from(req.headers.authorization ?? '');
  if (given.length !== token.length || !timingSafeEqual(given, token)) return reply.code(401).send({});
  const msg = req.body;
  const index = fnv1a32(msg.client_msg_id) % PARTITIONS;
  const p = partitions[index] as Partition;
  const indexKey = Buffer.from(`c${msg.client_msg_id}`);
  const known = p.db.getSync(indexKey);
  if (known !== undefined) return reply.code(200).send({ id: known.toString('hex'), recipients: [], duplicate: true });
  const key = Buffer.alloc(8);
  key.writeUInt8(index, 0);
  key.writeUInt8(1, 1);
  key.writeUIntBE(++p.counter, 2, 6);
  const now = Date.now();
  const expiresAt = now + (msg.ttl ?? 7 * 86_400) * 1000;
  const value = Buffer.from(JSON.stringify({ from: msg.from, to: [msg.to], type: msg.type, data: msg.data, ts: now, client_msg_id: msg.client_msg_id, expires_at: expiresAt }));
  await new Promise<void>((done, failed) => {
    p.waiting.push({ key, value, indexKey, done, failed });
    queueMicrotask(() => commit(p));
  });
  const id = key.toString('hex');
  const tag = `required:{${msg.to}}:`;
  const [seq] = await appendScript(
    `${tag}inbox`, `${tag}meta`, `${tag}ids`, `${tag}conns`, `${tag}acks`,
    id, '1', CAP, newEpoch(), String(now), '', String(expiresAt), String(DAY_MS), '0', '', DEVICE_CURSORS,
  );
  return reply.code(201).send({ id, recipients: [{ user: msg.to, seq }], duplicate: false });
});
await app.listen({ host: '127.0.0.1', port: Number(process.env.REQUIRED_WORK_PORT ?? 0) });
const addr = app.server.address();
const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
process.stdout.write(`${JSON.stringify({ msg: 'required work listening', url: `http://127.0.0.1:${port}` })}\n`);
process.once('SIGTERM', () => {
  void app.close()
    .then(() => Promise.all(partitions.map((p) => p.db.close())))
    .then(() => redis.quit())
    .finally(() => process.exit(0));
});
