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

/** Errors of a host that is no address of this machine, or no name that resolves (getaddrinfo's, libuv's `EAI_` codes). */
const HOST_CODES: ReadonlySet<string | undefined> = new Set(['EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME']);

/**
 * The start error for a failed listen on `host:port`: `cannot listen on <host>:<port>:
 * <reason>`, and the setting to change: for a port in use or not allowed (EADDRINUSE,
 * EACCES) the one that picks another port — the default 8080 is often taken on a
 * development machine — and for a host that is no address of this machine or does not
 * resolve, `PIXIU_HOST` (walk38 F6: `PIXIU_HOST=' '` said only `getaddrinfo ENOTFOUND`).
 * A host holding anything but the characters of a name or an address is shown quoted,
 * so that a blank one is seen. Used by this pre-flight check and by the real listen
 * (src/service/service.ts), so both say the same.
 */
export function listenFailure(host: string, port: number, err: unknown): StartupError {
  const code = (err as NodeJS.ErrnoException).code;
  const hint = code === 'EADDRINUSE' || code === 'EACCES' ? ' (choose another port with --port or PIXIU_PORT)'
    : HOST_CODES.has(code) ? ' (PIXIU_HOST or --host must be an address of this machine or a name resolving to one)' : '';
  const shown = /^[\w.:%[\]-]+$/.test(host) ? host : JSON.stringify(host);
  return new StartupError(`cannot listen on ${shown}:${port}: ${(err as Error).message}${hint}`, { cause: err });
}

/**
 * Binds `host:port` and lets it go again. Port 0 (any free port) is not checked.
 * @throws StartupError from {@link listenFailure} (the wording of the real listen's
 *   failure), e.g. EADDRINUSE, EACCES, EADDRNOTAVAIL, ENOTFOUND
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
    throw listenFailure(host, port, err);
  } finally {
    await new Promise<void>((resolve) => {
      if (probe.listening) probe.close(() => resolve());
      else resolve();
    });
  }
}
