/**
 * A real full disk for tests: a small tmpfs (root with the right to mount one; tests
 * skip without it), and a file that fills it.
 */
import type { TestContext } from 'node:test';
import { execFileSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** A fresh folder on a tmpfs of `size`, unmounted and removed when the test ends; undefined when none can be mounted. */
export async function smallDisk(t: TestContext, size: string): Promise<string | undefined> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-full-'));
  if (!mountSmallDisk(root, size)) {
    await rm(root, { recursive: true, force: true });
    return undefined;
  }
  t.after(async () => {
    execFileSync('umount', ['-l', root]);
    await rm(root, { recursive: true, force: true });
  });
  return root;
}

/** A log file on a fresh 1 MiB tmpfs ({@link smallDisk}), open for appending as `>>` opens stdout. */
export interface SmallDiskLog {
  /** The tmpfs's folder. */
  readonly disk: string;
  /** The log file's path. */
  readonly file: string;
  /** Its descriptor, closed when the test ends. */
  readonly fd: number;
}

/** {@link SmallDiskLog}; undefined when no tmpfs can be mounted. */
export async function smallDiskLog(t: TestContext): Promise<SmallDiskLog | undefined> {
  const disk = await smallDisk(t, '1m');
  if (disk === undefined) return undefined;
  const file = path.join(disk, 'pixiu.log');
  const fd = openSync(file, 'a');
  t.after(() => closeSync(fd));
  return { disk, file, fd };
}

/**
 * Mounts a tmpfs of `size` on the existing folder `dir` (e.g. one store partition's, in
 * a data dir); false without the right to mount one. The caller unmounts it
 * (`umount -l dir`), after whatever uses it has stopped.
 */
export function mountSmallDisk(dir: string, size: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Fills the file system holding `dir` with one file; answers its path. */
export async function fill(dir: string): Promise<string> {
  const filler = path.join(dir, 'filler');
  const chunk = Buffer.alloc(64 * 1024, 1);
  const parts: Buffer[] = [];
  for (let i = 0; i < 256; i++) parts.push(chunk);
  // One write of 16 MiB on a smaller disk: it writes what fits, then ENOSPC.
  await writeFile(filler, Buffer.concat(parts)).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOSPC') throw err;
  });
  return filler;
}

