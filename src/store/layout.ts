/**
 * The store's layout file, `<dir>/LAYOUT`: the partition count P and the partition
 * hash the data was written with. Both are on-disk contracts (DESIGN.md §3): a MsgID
 * names its partition, and a retry's `client_msg_id` is looked up in the partition
 * its hash picks, so reopening with another P would answer stored ids as missing and
 * store retried messages twice. The file is written on first open and checked on
 * every later one.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../errors.js';

/** The partition hash in use (src/store/route.ts). */
export const PARTITION_HASH = 'fnv1a-32-utf16';

/** Contents of the layout file. */
export interface StoreLayout {
  readonly format: 1;
  readonly partitions: number;
  readonly hash: string;
}

/**
 * Checks `dir`'s layout against `partitions`, writing the file when the store is new.
 * @throws StartupError when the store was created with another partition count or
 *   hash, or the file cannot be read or written; the message names the folder
 */
export async function checkLayout(dir: string, partitions: number): Promise<void> {
  const file = path.join(dir, 'LAYOUT');
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new StartupError(`cannot read the store layout ${file}: ${(err as Error).message}`, { cause: err });
    }
  }
  if (text === undefined) {
    const layout: StoreLayout = { format: 1, partitions, hash: PARTITION_HASH };
    try {
      await mkdir(dir, { recursive: true });
      await writeFile(file, `${JSON.stringify(layout)}\n`, { flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return checkLayout(dir, partitions);
      throw new StartupError(`cannot write the store layout ${file}: ${(err as Error).message}`, { cause: err });
    }
    return;
  }
  let layout: Partial<StoreLayout>;
  try {
    layout = JSON.parse(text) as Partial<StoreLayout>;
  } catch (err) {
    throw new StartupError(`the store layout ${file} is not valid JSON; restore it or move the store folder away`, { cause: err });
  }
  if (layout.partitions !== partitions) {
    throw new StartupError(
      `the store in ${dir} was created with ${String(layout.partitions)} partitions, not ${partitions}: ` +
      `start with PIXIU_PARTITIONS=${String(layout.partitions)} (the count of a store cannot change)`);
  }
  if (layout.hash !== PARTITION_HASH) {
    throw new StartupError(`the store in ${dir} uses partition hash ${String(layout.hash)}, this version uses ${PARTITION_HASH}`);
  }
}
