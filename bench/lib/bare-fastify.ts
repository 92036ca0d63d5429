/**
 * The ceiling of `bench:ingest`'s single-message case: a bare fastify server in its own
 * process with one route, `POST /v1/messages`, that parses the JSON body and answers
 * 201 with a small JSON body shaped like Pixiu's, doing nothing else.
 *
 * Run by bench/ingest.ts; prints `{"msg": "bare fastify listening", "url": …}` once it
 * listens on 127.0.0.1 (port 0: any free one) and exits on SIGTERM.
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024 });
app.post<{ Body: { to?: unknown } }>('/v1/messages', async (req, reply) => {
  const user = typeof req.body.to === 'string' ? req.body.to : 'unknown';
  return reply.code(201).send({ id: '0001000000000001', recipients: [{ user, seq: 1 }], duplicate: false });
});
await app.listen({ host: '127.0.0.1', port: 0 });
const addr = app.server.address();
const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
process.stdout.write(`${JSON.stringify({ msg: 'bare fastify listening', url: `http://127.0.0.1:${port}` })}\n`);
process.once('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
