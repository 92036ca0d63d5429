/**
 * A real stalled disk for tests: a small ext4 file system on a loop device, frozen with
 * `fsfreeze -f` (writes and fsyncs to it block in the kernel until `fsfreeze -u`; reads
 * of what is cached go on). Needs root with the right to mount a loop device; tests skip
 * without it, as the tmpfs tests do (small-disk.ts).
 *
 * A frozen file system left frozen holds every process that writes to it, the test's
 * own included, in an uninterruptible sleep: so the test's end thaws it first, then runs
 * what must stop before the unmount (closing a store, a service), then unmounts; and a
 * detached `sleep; fsfreeze -u` started with each freeze thaws it even if the test
 * process dies (killed by a timeout) before its end runs.
 */
import type { TestContext } from 'node:test';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** How long a freeze lasts at most, s: the detached thaw's delay. */
const FREEZE_SAFETY_S = 120;

/** A mounted ext4 folder that the test can freeze and thaw. */
export interface FreezableDisk {
  /** The mounted folder (empty but for `lost+found`). */
  readonly dir: string;
  /** Freezes the file system: writes to it block until {@link thaw}. */
  freeze(): void;
  /** Thaws it (nothing when it is not frozen). */
  thaw(): void;
  /**
   * Runs `stop` at the test's end after the thaw and before the unmount (what holds
   * files on the disk: a store, a service), in the order given.
   */
  beforeUnmount(stop: () => Promise<unknown>): void;
}

/** {@link freezableDisk}, or the test skipped (and undefined) when none can be made here. */
export async function freezableDiskOrSkip(t: TestContext, sizeMiB?: number): Promise<FreezableDisk | undefined> {
  const disk = await freezableDisk(t, sizeMiB);
  if (disk === undefined) t.skip('no right to mount and freeze a loop device');
  return disk;
}

/**
 * A fresh ext4 file system of `sizeMiB` on a loop device, mounted on a new folder and
 * unmounted (after a thaw) when the test ends; undefined when none can be made here
 * (not root, no loop devices, no mkfs.ext4 or fsfreeze).
 */
export async function freezableDisk(t: TestContext, sizeMiB = 64): Promise<FreezableDisk | undefined> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'pixiu-frozen-'));
  const image = path.join(root, 'disk.img');
  const dir = path.join(root, 'mnt');
  await mkdir(dir);
  try {
    execFileSync('truncate', ['-s', `${sizeMiB}M`, image], { stdio: 'ignore' });
    execFileSync('mkfs.ext4', ['-q', '-F', image], { stdio: 'ignore' });
    execFileSync('mount', ['-o', 'loop', image, dir], { stdio: 'ignore' });
    execFileSync('which', ['fsfreeze'], { stdio: 'ignore' });
  } catch {
    try {
      execFileSync('umount', [dir], { stdio: 'ignore' });
    } catch {
      // Not mounted.
    }
    await rm(root, { recursive: true, force: true });
    return undefined;
  }
  let safety: ChildProcess | undefined;
  const stops: (() => Promise<unknown>)[] = [];
  const disk: FreezableDisk = {
    dir,
    freeze() {
      if (safety === undefined) {
        safety = spawn('sh', ['-c', `sleep ${FREEZE_SAFETY_S}; fsfreeze -u '${dir}'`], { detached: true, stdio: 'ignore' });
        safety.unref();
      }
      execFileSync('fsfreeze', ['-f', dir]);
    },
    thaw() {
      try {
        execFileSync('fsfreeze', ['-u', dir], { stdio: 'ignore' });
      } catch {
        // Not frozen.
      }
      if (safety?.pid !== undefined) {
        // The detached shell and its sleep: a group of their own.
        try {
          process.kill(-safety.pid, 'SIGTERM');
        } catch {
          // Gone already.
        }
      }
      safety = undefined;
    },
    beforeUnmount(stop) {
      stops.push(stop);
    },
  };
  t.after(async () => {
    disk.thaw();
    try {
      for (const stop of stops) await stop();
    } finally {
      // Lazy: a file still open (a stop that failed) does not keep the mount.
      execFileSync('umount', ['-l', dir]);
      await rm(root, { recursive: true, force: true });
    }
  });
  return disk;
}
