/**
 * A pre-flight check that the HTTP address can be bound, run before the service
 * starts anything: a port in use or a host that is not this machine's is then told at
 * once, before an embedded redis-server is started and, above all, before a new data
 * dir claims its block of MsgID partitions in Redis (src/cluster/store-ownership.ts),
 * which a start that fails later would have kept for good (there are 32 blocks of 8).
 *
 * The real listen comes later and can still fail (another process may take the port
 * meanwhile); this only makes the usual mistakes cheap.
 */
import { createServer } from 'node:net';
import { StartupError } from '../errors.js';

/**
 * Binds `host:port` and lets it go again. Port 0 (any free port) is not checked.
 * @throws StartupError `cannot listen on <host>:<port>: <reason>` (the wording of the
 *   real listen's failure), e.g. EADDRINUSE, EACCES, EADDRNOTAVAIL, ENOTFOUND
 */
export async function checkListenable(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host, port, exclusive: true }, () => resolve());
    });
  } catch (err) {
    throw new StartupError(`cannot listen on ${host}:${port}: ${(err as Error).message}`, { cause: err });
  } finally {
    await new Promise<void>((resolve) => {
      if (probe.listening) probe.close(() => resolve());
      else resolve();
    });
  }
}
