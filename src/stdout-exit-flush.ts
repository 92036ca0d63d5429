/**
 * The log's last write, as the process exits: the lines SonicBoom holds are written
 * synchronously once, in order, and what the first failing write leaves is given up.
 *
 * pino flushes an asynchronous destination at `process.exit` (and at an uncaught
 * exception's exit) with SonicBoom's `flushSync`, which sleeps 100 ms and tries again
 * after every write error but a refused EAGAIN — on a full disk, for good. It did so
 * whenever two lines were logged in the turn that exits (`shutting down` and `pixiu
 * stopped`, a line and `pixiu crashed`) on a disk that had filled since the last line
 * went through: the first line's write was still on the thread pool, so its ENOSPC had
 * not come back to say writes fail, and the second line's write went round forever
 * (review33 F1). This flush reads SonicBoom's held chunks itself — it has no way to
 * bound its own — so it is written against sonic-boom 4's fields, checked before use:
 * another shape writes nothing rather than risk the hang.
 *
 * A write in flight on the thread pool as the process exits is left to it, as
 * SonicBoom's flush leaves it (the held lines may then land before it or without it).
 * That is a file's or a socket's: a pipe is written synchronously (stdout-destination.ts),
 * so nothing of it is in flight, and its held lines follow whole what went before.
 *
 * A reader that refuses writes for now (EAGAIN, EBUSY: a full non-blocking pipe, a busy
 * terminal) is tried again, after 1 ms, then twice as long each time up to 100 ms, as
 * long as it takes something: the exit gives up once it has taken nothing for
 * {@link LOG_EXIT_WAIT_MS}, or after {@link LOG_EXIT_MAX_MS} in all (a reader that reads
 * keeps up to 8 MiB of held lines; one second of waits took ~640 KiB of a pipe at most).
 */
import { writeSync } from 'node:fs';

/** How long the exit waits, at most, on a reader that answers EAGAIN or EBUSY (a full pipe, a busy terminal) and takes nothing meanwhile, ms. */
export const LOG_EXIT_WAIT_MS = 1000;

/** How long the exit waits in all, at most, on a reader that answers EAGAIN or EBUSY and takes a little now and then, ms. */
export const LOG_EXIT_MAX_MS = 5000;

/** Longest pause between two tries of a write refused with EAGAIN or EBUSY, ms (SonicBoom's own). */
const BUSY_PAUSE_MAX_MS = 100;

/** The fields of a sonic-boom 4 stream (utf8 content mode) that hold the lines not written yet. */
interface HeldLines {
  /** The descriptor written (-1 while a file is being opened). */
  readonly fd: number;
  /** Chunks (whole lines, up to 16 KiB each unless one line is longer) not written yet, oldest first. */
  _bufs: (string | Buffer)[];
  /** The chunk being written, or the rest of one a write failed to finish (`_writing` false then). */
  _writingBuf: string | Buffer;
  /** A write is in flight on the thread pool. */
  readonly _writing: boolean;
  /** Bytes held in all, `_writingBuf` included. */
  _len: number;
}

/** The stream's held lines when it has sonic-boom 4's shape, else undefined. */
function heldLines(stream: object): HeldLines | undefined {
  const s = stream as Partial<Record<keyof HeldLines, unknown>>;
  const chunk = (c: unknown): boolean => typeof c === 'string' || Buffer.isBuffer(c);
  return typeof s.fd === 'number' && Array.isArray(s._bufs) && s._bufs.every(chunk) && chunk(s._writingBuf)
    && typeof s._writing === 'boolean' && typeof s._len === 'number'
    ? stream as HeldLines
    : undefined;
}

/** Blocks the thread for `ms` (the process is exiting: there is no loop to wait on). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Writes what `stream` (a sonic-boom 4 stream in utf8 mode, as `pino.destination`
 * makes) holds, synchronously, in order, and stops at the first write error: the bytes
 * left stay held (and are lost with the process). EAGAIN and EBUSY are tried again
 * until nothing was taken for {@link LOG_EXIT_WAIT_MS}, or {@link LOG_EXIT_MAX_MS} in
 * all (see the module's doc). Throws nothing; writes nothing when the stream's fields
 * are not sonic-boom 4's.
 */
export function flushHeldOnce(stream: object): void {
  const s = heldLines(stream);
  if (s === undefined || s.fd < 0) return;
  // The rest of a chunk a failed write left comes first (SonicBoom's flushSync does the same).
  if (!s._writing && s._writingBuf.length > 0) {
    s._bufs.unshift(s._writingBuf);
    s._writingBuf = '';
  }
  /** Waits since the last write that took something, and in all, ms; the next pause. */
  let stalledMs = 0;
  let waitedMs = 0;
  let pauseMs = 1;
  while (s._bufs.length > 0) {
    const first = s._bufs[0] as string | Buffer;
    const bytes = typeof first === 'string' ? Buffer.from(first) : first;
    let written: number;
    try {
      written = writeSync(s.fd, bytes);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code === 'EAGAIN' || code === 'EBUSY') && stalledMs < LOG_EXIT_WAIT_MS && waitedMs < LOG_EXIT_MAX_MS) {
        pause(pauseMs);
        stalledMs += pauseMs;
        waitedMs += pauseMs;
        pauseMs = Math.min(pauseMs * 2, BUSY_PAUSE_MAX_MS);
        continue;
      }
      return;
    }
    // A write that takes nothing and says nothing: nothing will move, so stop here too.
    if (written === 0 && bytes.length > 0) return;
    stalledMs = 0;
    pauseMs = 1;
    s._len = Math.max(s._len - written, 0);
    if (written < bytes.length) s._bufs[0] = bytes.subarray(written);
    else s._bufs.shift();
  }
}
