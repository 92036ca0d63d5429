/**
 * Redis's MONITOR on a plain TCP socket: every command the server runs, as it runs it,
 * for tests that check what a node sends (from outside the node).
 *
 * Why not ioredis's `monitor()`: it switches its connection into monitor mode only once
 * the `+OK` of MONITOR has been handled, so a monitored line that arrives in the same
 * read as that `+OK` (a busy server) is taken for the reply of no command and ioredis
 * throws "Command queue state error … Last reply: <time> [0 …] "time"" (ioredis issue
 * #1981; seen in a CI run under load, gateway/handshake). Here every line after the
 * `+OK` is a monitored command, whatever read it comes in.
 */
import net from 'node:net';
import { once } from 'node:events';
import type { CleanupContext } from './pixiu-server.js';

/** A command as MONITOR shows it: its arguments, the command's name first, as latin1 strings. */
export type MonitoredCommand = readonly string[];

/**
 * The arguments of one MONITOR line, `<time> [<db> <client>] "arg" "arg" …`: each a
 * quoted string with Redis's escapes (`\"`, `\\`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xHH`:
 * sdscatrepr). Answers undefined for a line of another shape.
 */
export function monitorArgs(line: string): string[] | undefined {
  const start = line.indexOf('] "');
  if (start < 0) return undefined;
  const args: string[] = [];
  let i = start + 2;
  while (i < line.length) {
    if (line[i] === ' ') { i++; continue; }
    if (line[i] !== '"') return undefined;
    let arg = '';
    i++;
    for (; i < line.length && line[i] !== '"'; i++) {
      if (line[i] !== '\\') { arg += line[i]; continue; }
      const next = line[++i];
      if (next === 'x') {
        arg += String.fromCharCode(parseInt(line.slice(i + 1, i + 3), 16));
        i += 2;
      } else {
        arg += ({ n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' } as Record<string, string>)[next ?? ''] ?? next ?? '';
      }
    }
    args.push(arg);
    i++;
  }
  return args;
}

/**
 * Opens a connection to the Redis at `url` (redis://host:port), sends MONITOR, and
 * resolves once Redis answered `+OK`; from then on `onCommand` gets every command Redis
 * runs, in order. The socket is destroyed in `t`'s clean-up.
 * @throws Error when Redis answers MONITOR with anything but `+OK`
 */
export async function monitorRedis(url: string, t: CleanupContext, onCommand: (args: MonitoredCommand) => void): Promise<void> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  t.after(() => { socket.destroy(); });
  await once(socket, 'connect');
  socket.setEncoding('latin1');
  let pending = '';
  let started = false;
  const ok = new Promise<void>((resolve, reject) => {
    socket.on('data', (chunk: string) => {
      pending += chunk;
      for (let end = pending.indexOf('\r\n'); end >= 0; end = pending.indexOf('\r\n')) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 2);
        if (!started) {
          if (line !== '+OK') { reject(new Error(`MONITOR answered ${JSON.stringify(line)}`)); return; }
          started = true;
          resolve();
          continue;
        }
        const args = monitorArgs(line.startsWith('+') ? line.slice(1) : line);
        if (args !== undefined) onCommand(args);
      }
    });
    socket.on('error', reject);
  });
  socket.write('MONITOR\r\n');
  await ok;
}
