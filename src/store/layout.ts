/**
 * The store's layout file, `<dir>/LAYOUT`: the partition count P and the partition
 * hash the data was written with, the store's id and its partition base. All are
 * on-disk contracts (DESIGN.md §3): a MsgID names its partition, and a retry's
 * `client_msg_id` is looked up in the partition its hash picks, so reopening with
 * another P would answer stored ids as missing and store retried messages twice.
 *
 * Partition base B (DESIGN.md §2, §9): the store's P partitions mint the MsgID
 * partition bytes B..B+P-1, so that stores of several nodes sharing one Redis never
 * mint the same ids. The base is claimed in Redis on the first start of a data dir
 * (src/cluster/store-ownership.ts) and pinned here; a file written before bases
 * existed (no `storeId`) keeps base 0. A file with a `storeId` and no base is a store
 * whose claim has not been pinned yet (a first start that stopped half-way).
 *
 * The file is written on first open, rewritten (atomically) only to pin the base, add
 * a store id, record the key prefix of a start on a shared Redis or the build that
 * serves it, and checked on every later open. A missing file beside partition folders
 * is refused, not made anew (src/store/orphan-check.ts).
 *
 * Format ({@link LAYOUT_FORMAT}): the version of the data dir's on-disk layout as a
 * whole. A release reads the formats up to the one it writes and refuses a higher one
 * (a newer, incompatible release wrote it: opening it would misread it), so a
 * downgrade across a format change stops at start instead of damaging the data dir.
 * Fields a release does not know are kept and not refused: a newer release of the
 * same format may add some (as `redisPrefix` was added).
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { explained, makeDir } from '../files/make-dir.js';
import { PRIVATE_DIR_MODE } from '../files/private-data.js';
import { removeLeftTemps, writeDurably } from '../files/durable-write.js';
import path from 'node:path';
import { StartupError } from '../errors.js';
import { quotedText } from '../text-cut.js';
import { PREFIX_RULE } from '../redis/keys.js';
import { versionLine } from '../version.js';
import { refuseOrphaning } from './orphan-check.js';

/** The partition hash in use (src/store/route.ts). */
export const PARTITION_HASH = 'fnv1a-32-utf16';

/** What a store id looks like: the generated ones are 16 hex digits. */
const STORE_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * The layout format this release writes, and the highest it reads (from 1 up). Raise it
 * only for a change an older release would misread; fields it can ignore need none.
 */
export const LAYOUT_FORMAT = 1;

/** Contents of the layout file. */
export interface StoreLayout {
  /** 1 .. {@link LAYOUT_FORMAT} (a higher one is refused by {@link readLayout}). */
  readonly format: number;
  readonly partitions: number;
  readonly hash: string;
  /**
   * The store's id (random, 16 hex digits when generated): names its partition claim
   * and its lease in Redis. Absent only in files written before ids existed.
   */
  readonly storeId?: string;
  /**
   * First MsgID partition byte of the store: its partitions are
   * `partitionBase .. partitionBase + partitions - 1`. Absent: 0 when there is no
   * `storeId` (an older store), else not claimed yet.
   */
  readonly partitionBase?: number;
  /**
   * The Redis key prefix (`PIXIU_REDIS_PREFIX`) of the store's last start on a shared
   * Redis (`PIXIU_REDIS_URL`): the one its claim, lease and inboxes are under there
   * (src/cluster/prefix-guard.ts). Absent: never started on a shared Redis since
   * prefixes were recorded.
   */
  readonly redisPrefix?: string;
  /**
   * The Redis database number (the URL's `/N`) of that start, recorded with
   * {@link redisPrefix} (src/cluster/prefix-guard.ts `refuseClusterSplit`). Absent:
   * recorded before databases were.
   */
  readonly redisDb?: number;
  /**
   * The build that last wrote the file, as `pixiu --version` prints it (`0.1.0
   * (c01b527)`, src/version.ts): set by every write, and written by every serving
   * start that finds another ({@link recordWriter}), for an operator's eyes and the
   * refusal of a newer format only — nothing depends on it. A release from before it
   * existed keeps it as it found it when it rewrites the file, so after a downgrade to
   * one it can name a later build than the last writer. Absent: last written by such a
   * release.
   */
  readonly writtenBy?: string;
}

/** A layout with its store id (every layout once {@link openLayout} has run). */
export type IdentifiedLayout = StoreLayout & { readonly storeId: string };

/**
 * A store's layout as one read of its file found it ({@link refuseUnreadableStore}),
 * passed along a serving start so that the file is read (and validated) once, not at
 * every step (src/service/service.ts).
 */
export interface FoundLayout {
  /** The store folder, `<data dir>/xiu`. */
  readonly dir: string;
  /** The layout; undefined when the store is new (no file, and no partitions). */
  readonly layout: StoreLayout | undefined;
}

/** A fresh random store id: 16 hex digits. */
export function newStoreId(): string {
  return randomBytes(8).toString('hex');
}

function layoutFile(dir: string): string {
  return path.join(dir, 'LAYOUT');
}

/**
 * How a `format` that is no finite number (JSON's `1e400` reads as Infinity) was
 * written in `text`: the last `"format": <number>` in it whose number is no finite
 * one (cut to 40 characters), else undefined.
 */
function writtenNumber(text: string): string | undefined {
  const written = [...text.matchAll(/"format"\s*:\s*(-?[0-9][0-9.eE+-]*)/g)].map((m) => m[1]);
  const number = written.filter((n) => !Number.isFinite(Number(n))).pop();
  return number !== undefined && number.length > 40 ? `${number.slice(0, 40)}…` : number;
}

/**
 * Refuses a layout whose `format` this release does not read: one above
 * {@link LAYOUT_FORMAT} (written by a newer release), or one that is no positive
 * integer. A missing `format` is damage, not age: every release wrote `"format": 1`
 * from the first LAYOUT on (git history: the store's first commit, c8bd637, did), so
 * no older data dir lacks it. Values from the file are quoted (src/text-cut.ts `quotedText`).
 * @param text the file as read, to name a number JSON cannot hold as it was written
 * @throws StartupError naming the file or folder, the format and what to do
 */
function checkFormat(dir: string, file: string, layout: Record<string, unknown>, text: string): void {
  const format = layout.format;
  if (!Number.isSafeInteger(format) || (format as number) < 1) {
    const shown = typeof format === 'number' && !Number.isFinite(format) ? writtenNumber(text) : quotedText(format, 40);
    const what = format === undefined ? 'it has no "format"'
      : shown === undefined ? 'its "format" is not a positive integer' : `its "format" ${shown} is not a positive integer`;
    throw new StartupError(`the store layout ${file} is damaged: ${what}; restore the data dir from a backup`);
  }
  if ((format as number) > LAYOUT_FORMAT) {
    const by = typeof layout.writtenBy === 'string' ? `, last written by ${quotedText(layout.writtenBy, 80)}` : '';
    throw new StartupError(`the store in ${dir} was written by a newer release of Pixiu (format ${String(format)}${by}); `
      + `this release reads format ${LAYOUT_FORMAT}: start the release that wrote it`);
  }
}

/**
 * Fields only a layout with a `storeId` was ever written with: `partitionBase` came
 * with store ids (00967a5), the others after them. A file with one of them and no
 * `storeId` lost it (a hand edit): taken for a store from before ids, it would be given a
 * new id, written before its claim is refused.
 */
const AFTER_STORE_IDS = ['partitionBase', 'writtenBy', 'redisPrefix', 'redisDb'] as const;

/**
 * What a damaged layout's refusal advises. Not to move the store folder away: a new
 * store made beside (or instead of) the old partitions orphans their messages, which
 * the missing-layout refusal exists to prevent (orphan-check.ts).
 */
const RESTORE_ADVICE = 'restore it from the backup the data dir came from, or rebuild it (README "Backups and restores")';

/**
 * Reads `dir`'s layout file.
 * @returns the layout, or undefined when the store is new (no file)
 * @throws StartupError when the file cannot be read or is not a layout, or its format
 *   is not one this release reads ({@link checkFormat})
 */
export async function readLayout(dir: string): Promise<StoreLayout | undefined> {
  const file = layoutFile(dir);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new StartupError(`cannot read the store layout ${file}: ${await explained(file, err)}`, { cause: err });
  }
  let layout: StoreLayout;
  try {
    layout = JSON.parse(text) as StoreLayout;
  } catch (err) {
    throw new StartupError(`the store layout ${file} is damaged: it is not valid JSON; ${RESTORE_ADVICE}`, { cause: err });
  }
  if (typeof layout !== 'object' || layout === null || Array.isArray(layout)) {
    throw new StartupError(`the store layout ${file} is damaged: it is not a JSON object; ${RESTORE_ADVICE}`);
  }
  checkFormat(dir, file, layout as unknown as Record<string, unknown>, text);
  // Every release wrote both, from the first (c8bd637): without them the advice of
  // checkCompatible ("start with PIXIU_PARTITIONS=undefined") could not be followed.
  if (!Number.isSafeInteger(layout.partitions) || layout.partitions < 1 || layout.partitions > 256) {
    const what = layout.partitions === undefined ? 'it has no "partitions"' : `its "partitions" ${quotedText(layout.partitions, 40)} is not a count of 1 to 256`;
    throw new StartupError(`the store layout ${file} is damaged: ${what}; ${RESTORE_ADVICE}`);
  }
  if (typeof layout.hash !== 'string') {
    const what = layout.hash === undefined ? 'it has no "hash"' : `its "hash" ${quotedText(layout.hash, 40)} is not a name`;
    throw new StartupError(`the store layout ${file} is damaged: ${what}; ${RESTORE_ADVICE}`);
  }
  const lost = AFTER_STORE_IDS.find((key) => layout[key] !== undefined);
  if (layout.storeId === undefined && lost !== undefined) {
    throw new StartupError(`the store layout ${file} is damaged: it has a "${lost}" but no "storeId"; `
      + 'restore it from the backup the data dir came from (README "Backups and restores")');
  }
  if (layout.storeId !== undefined && (typeof layout.storeId !== 'string' || !STORE_ID.test(layout.storeId))) {
    throw new StartupError(`the store layout ${file} has a malformed storeId ${quotedText(layout.storeId, 40)}`);
  }
  const base = layout.partitionBase;
  if (base !== undefined && (!Number.isInteger(base) || base < 0 || base + layout.partitions > 256)) {
    throw new StartupError(`the store layout ${file} has a partition base ${quotedText(base, 40)} out of range`);
  }
  if (layout.redisPrefix !== undefined && (typeof layout.redisPrefix !== 'string' || !PREFIX_RULE.test(layout.redisPrefix))) {
    throw new StartupError(`the store layout ${file} has a malformed redisPrefix ${quotedText(layout.redisPrefix, 40)}`);
  }
  if (layout.redisDb !== undefined && (!Number.isSafeInteger(layout.redisDb) || layout.redisDb < 0)) {
    throw new StartupError(`the store layout ${file} has a malformed redisDb ${quotedText(layout.redisDb, 40)}`);
  }
  return layout;
}

/**
 * Refuses a start on a store this release cannot read (its layout's format is newer
 * than this release's, or damaged: {@link readLayout}), or whose layout is missing while
 * its folder holds partitions ({@link refuseOrphaning}) — run first, before a start
 * writes anything into the data dir or claims anything in Redis. A store with no layout
 * and no partitions (a new data dir) passes.
 * @param dir the store folder, `<data dir>/xiu`
 * @returns the layout read, for the start's later steps ({@link FoundLayout})
 * @throws StartupError as {@link readLayout} and {@link refuseOrphaning}
 */
export async function refuseUnreadableStore(dir: string): Promise<FoundLayout> {
  const layout = await readLayout(dir);
  if (layout === undefined) await refuseOrphaning(dir);
  return { dir, layout };
}

/**
 * Writes `layout` as `dir`'s layout file, with this build as its `writtenBy`, atomically
 * and durably (src/files/durable-write.ts: a temp file of its own, fsynced, put in
 * place, the folder fsynced — not where the file system refuses fsync on a folder).
 * `exclusive`: only when there is none (a new store; `link`ed into place, so a reader
 * never meets it empty; resolves undefined when another open created it first).
 * Otherwise the file is replaced (`rename`).
 * @returns the layout as written, `writtenBy` included, for the start's later steps
 *   (with it, {@link recordWriter} knows this build wrote the file: a first start wrote
 *   it once more without it)
 * @throws StartupError when the file cannot be written
 */
async function writeLayout<T extends StoreLayout>(dir: string, layout: T, exclusive: boolean): Promise<T | undefined> {
  const file = layoutFile(dir);
  const written: T = { ...layout, writtenBy: versionLine() };
  try {
    // Private (src/files/private-data.ts): the partitions under it hold message bodies.
    await makeDir(dir, PRIVATE_DIR_MODE);
    return await writeDurably(file, `${JSON.stringify(written)}\n`, exclusive) ? written : undefined;
  } catch (err) {
    throw new StartupError(`cannot write the store layout ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** Replaces `dir`'s layout file by `layout` ({@link writeLayout}). @returns the layout as written */
async function replaceLayout<T extends StoreLayout>(dir: string, layout: T): Promise<T> {
  return (await writeLayout(dir, layout, false)) ?? layout;
}

/**
 * Checks a layout's partition count and hash against this process's. Values from the
 * file are quoted (src/text-cut.ts `quotedText`).
 * @throws StartupError naming the folder and what to do
 */
function checkCompatible(dir: string, layout: StoreLayout, partitions: number): void {
  if (layout.partitions !== partitions) {
    // A count 1..256 by now (readLayout refuses any other).
    const count = String(layout.partitions);
    throw new StartupError(
      `the store in ${dir} was created with ${count} partitions, not ${partitions}: ` +
      `start with PIXIU_PARTITIONS=${count} (the count of a store cannot change)`);
  }
  if (layout.hash !== PARTITION_HASH) {
    throw new StartupError(`the store in ${dir} uses partition hash ${quotedText(layout.hash, 40)}, this version uses ${PARTITION_HASH}`);
  }
}

/**
 * Opens `dir`'s layout for claiming (src/cluster/store-ownership.ts): creates it for a
 * new store, with a new store id and no base yet — not while the folder holds
 * partitions ({@link refuseOrphaning}); gives an older store (no store id) an id and
 * base 0; otherwise checks it. Removes the temp files of layout writes a killed process
 * left (src/files/durable-write.ts `removeLeftTemps`).
 * @param found the layout the start read already ({@link refuseUnreadableStore}); one
 *   without a store id is read again before it is given one; default: read here
 * @returns the layout; `partitionBase` is undefined when the base is still to claim
 * @throws StartupError when the store was created with another partition count or
 *   hash, its layout is missing beside partitions, or the file cannot be read or
 *   written; the message names the folder
 */
export async function openLayout(dir: string, partitions: number, found?: FoundLayout): Promise<IdentifiedLayout> {
  await removeLeftTemps(layoutFile(dir));
  // A layout from before store ids is read again right before it is given one: `found`
  // was read before the secrets and Redis started (seconds), and that write is no
  // `link`, so a start beside this one could have given it an id since (a review's L10).
  const stale = found?.layout !== undefined && found.layout.storeId === undefined;
  for (let given = stale ? undefined : found; ; given = undefined) {
    const layout = given !== undefined ? given.layout : await readLayout(dir);
    if (layout === undefined) {
      await refuseOrphaning(dir);
      const created = await writeLayout(dir, { format: LAYOUT_FORMAT, partitions, hash: PARTITION_HASH, storeId: newStoreId() }, true);
      if (created !== undefined) return created;
      continue; // another open created it first (since `found` was read, too): read theirs
    }
    checkCompatible(dir, layout, partitions);
    if (layout.storeId !== undefined) return layout as IdentifiedLayout;
    // Written before store ids: its ids were minted from partitions 0..P-1.
    return replaceLayout<IdentifiedLayout>(dir, { ...layout, storeId: newStoreId(), partitionBase: 0 });
  }
}

/**
 * Pins the claimed partition base in `dir`'s layout (after {@link openLayout}).
 * @throws StartupError when the file cannot be written, or already pins another base
 */
export async function pinPartitionBase(dir: string, layout: IdentifiedLayout, base: number): Promise<IdentifiedLayout> {
  if (layout.partitionBase === base) return layout;
  if (layout.partitionBase !== undefined) {
    throw new StartupError(`the store in ${dir} has partition base ${layout.partitionBase}; it cannot move to ${base}`);
  }
  return replaceLayout(dir, { ...layout, partitionBase: base });
}

/**
 * Records `prefix` and `db` as the key prefix and database number of the store's last
 * start on a shared Redis ({@link StoreLayout.redisPrefix}, {@link StoreLayout.redisDb});
 * writes the file only when `layout` (the file as the claim left it) names others (or
 * none). Run once the store's claim is held under `prefix` and the store is open (the
 * data dir's lock and its partitions' held: src/service/store-start.ts), so that a start
 * that fails on a data dir in use never records a Redis it did not run on.
 * @returns the layout as the file now holds it
 * @throws StartupError when the file cannot be written
 */
export async function recordRedisPrefix(dir: string, layout: IdentifiedLayout, prefix: string, db: number): Promise<IdentifiedLayout> {
  if (layout.redisPrefix === prefix && layout.redisDb === db) return layout;
  return replaceLayout(dir, { ...layout, redisPrefix: prefix, redisDb: db });
}

/**
 * Names this build as the last writer of `dir`'s layout ({@link StoreLayout.writtenBy}):
 * rewrites the file (atomically, as every write) when it names another build, or none.
 * Run by a node that will serve the store (its claim and lease held), so that
 * `writtenBy` names the last build that served it, not only the one that created it.
 * @param known the layout as the start last read or wrote it; default: read here
 * @throws StartupError when the file cannot be read or written
 */
export async function recordWriter(dir: string, known?: StoreLayout): Promise<void> {
  const layout = known ?? await readLayout(dir);
  if (layout === undefined || layout.writtenBy === versionLine()) return;
  await replaceLayout(dir, layout);
}

/**
 * Checks `dir`'s layout against `partitions` and `base`, writing the file (with a new
 * store id) when the store is new. Without `known`, first removes the temp files of
 * layout writes a killed process left, as {@link openLayout} does (a caller that passes
 * `known` ran openLayout before).
 * @param base the store's first partition number; 0 for a store used without Redis
 *   (tools, tests)
 * @param known the layout as the caller last read or wrote it (a serving start's, once
 *   its claim pinned the base); default: read here
 * @throws StartupError when the store was created with another partition count, hash
 *   or base, has not pinned its base yet, its layout is missing beside partitions
 *   ({@link refuseOrphaning}), or the file cannot be read or written; the message
 *   names the folder
 */
export async function checkLayout(dir: string, partitions: number, base = 0, known?: StoreLayout): Promise<void> {
  if (known === undefined) await removeLeftTemps(layoutFile(dir));
  let layout = known ?? await readLayout(dir);
  if (layout === undefined) {
    await refuseOrphaning(dir);
    const created: StoreLayout = { format: LAYOUT_FORMAT, partitions, hash: PARTITION_HASH, storeId: newStoreId(), partitionBase: base };
    if (await writeLayout(dir, created, true) !== undefined) return;
    layout = await readLayout(dir);
    if (layout === undefined) throw new StartupError(`the store layout ${layoutFile(dir)} vanished while it was being created`);
  }
  checkCompatible(dir, layout, partitions);
  const pinned = layout.partitionBase ?? (layout.storeId === undefined ? 0 : undefined);
  if (pinned === undefined) {
    throw new StartupError(`the store in ${dir} has not claimed its partitions yet: start \`pixiu serve\` on it once`);
  }
  if (pinned !== base) {
    throw new StartupError(
      `the store in ${dir} mints partitions ${pinned}..${pinned + partitions - 1}, not ${base}..${base + partitions - 1}`);
  }
}
