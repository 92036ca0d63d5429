/**
 * A FIFO to give a process (or a log destination) as its stdout, read by the test when
 * it chooses: the tests of a log reader that stops reading (a FIFO is what a shell's
 * `|` and Docker's log FIFOs give a process, not the socket pair of a `'pipe'` stdio).
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import type { CleanupContext } from './pixiu-server.js';

/** A FIFO with its reader open. */
export interface ReadFifo {
  /** The FIFO's path: open it for writing (its reader is open, so that does not wait). */
  readonly path: string;
  /** Reads what the FIFO holds now, without waiting; answers everything read so far, as UTF-8. */
  read(): string;
}

/**
 * Makes a FIFO in a fresh temporary folder and opens its reader, non-blocking; both are
 * removed after the test.
 * @throws Error when `mkfifo` fails (not Linux or another POSIX system)
 */
export async function readFifo(t: CleanupContext): Promise<ReadFifo> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pixiu-fifo-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const fifo = path.join(dir, 'stdout');
  execFileSync('mkfifo', [fifo]);
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  t.after(() => closeSync(reader));
  const chunk = Buffer.alloc(1 << 20);
  const decoder = new StringDecoder('utf8');
  let out = '';
  return {
    path: fifo,
    read: () => {
      for (;;) {
        let n = 0;
        try {
          n = readSync(reader, chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        }
        if (n <= 0) return out;
        out += decoder.write(chunk.subarray(0, n));
      }
    },
  };
}
