/**
 * This node's ownership of its store's partitions (DESIGN.md §2, §9): the block of
 * MsgID partition bytes its data dir mints, claimed in Redis on the data dir's first
 * start and pinned in its LAYOUT file (src/store/layout.ts), and the lease that tells
 * other nodes where to read them.
 *
 * - {@link StoreOwnership.claim}, before the store opens: the data dir's store id and
 *   base. A new data dir claims the lowest free block; one with a base re-asserts it; a
 *   block held by another store is a {@link StartupError} — never colliding ids.
 * - {@link StoreOwnership.advertise}, once the node listens: writes the lease
 *   (`{url, node}`, TTL {@link LEASE_TTL_MS}) and {@link LEASE_RENEW_MS} after each
 *   renewal began ({@link LEASE_RETRY_MS} after a failed one) renews it and re-asserts
 *   the claim, so both come back after a FLUSHALL. A re-assertion
 *   that finds the block held by another store (a new data dir claimed it in the
 *   moments after a FLUSHALL) suspends this node's writes until the block is its own
 *   again, and logs at error. Each renewal that finds the lease still this node's
 *   moves the store's write deadline to {@link LEASE_FENCE_MS} after its start
 *   (src/store/write-fence.ts): a node that could not renew for that long (cut off
 *   from Redis, its process paused) takes no write until a renewal confirms the lease
 *   again, since the lease may have lapsed and another node taken the store.
 * - {@link StoreOwnership.stop}, on shutdown: stops renewing and drops the lease, so
 *   readers learn at once that the store cannot be read now.
 *
 * One store, one running node: a copy of a data dir has the same store id and mints
 * the same MsgIDs, so two copies running at once overwrite each other's messages
 * (acknowledged messages lost, one user's content shown to another). A node refuses to
 * start while another live node holds its store's lease ({@link awaitLeaseFree}; right
 * after Redis lost its data, once the running nodes have written theirs back), and
 * a running node that finds its lease replaced by another node's suspends its writes
 * until it is alone again. Every node records its counters in Redis; a data dir behind
 * what any store recorded for its partitions, and a node alone again after a conflict,
 * move their counters {@link RESUME_MARGIN} past it before minting.
 */
import { outageFields } from '../errors.js';
import { LogThrottle, thinnedFields } from '../log-throttle.js';
import { redisStateReason } from '../redis/state-replies.js';
import type { IdentifiedLayout } from '../store/layout.js';
import { claimRefusal, type StoreDescription, type StoreLease } from './partition-claims.js';
import { BOOT_ID, LEASE_FENCE_MS, LEASE_RENEW_MS, LEASE_RETRY_MS, LEASE_TTL_MS, PID_NAMESPACE, servedElsewhere } from './lease-watch.js';
import { claimBlock, type ClaimedBlock, type StoreOwnershipOptions } from './block-claim.js';
import { MintedRecord, type MintingStore } from './minted-counters.js';
import { WriteDeadline, type OwnedStore } from './write-deadline.js';
import { FORGOTTEN_EFFECTS } from './redis-loss-lines.js';
import { LostWrites } from './lost-writes.js';

export { LEASE_FENCE_MS, LEASE_RENEW_MS, LEASE_RETRY_MS, LEASE_TTL_MS, LEASE_WATCH_MS, awaitLeaseFree } from './lease-watch.js';
export { RESUME_MARGIN, type MintingStore } from './minted-counters.js';

/** The partitions this node's store holds, and their lease. */
export class StoreOwnership {
  /** The data dir's store id (its LAYOUT file). */
  readonly storeId: string;
  /** First MsgID partition byte: the store holds `partitionBase .. partitionBase + partitions - 1`. */
  readonly partitionBase: number;
  readonly partitions: number;
  /** The store's layout as the claim left it (its base pinned), for the start's later steps. */
  readonly layout: IdentifiedLayout;
  readonly #opts: StoreOwnershipOptions;
  readonly #description: StoreDescription;
  #timer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  /** Why writes are suspended (the claim lost, or another node's lease found), if they are. */
  #conflict: string | undefined;
  #renewNow: (() => void) | undefined;
  /** Thins the warnings of renewals failed past the writes' deadline (tried every second while Redis fails them). */
  readonly #fencedFailures = new LogThrottle(LEASE_RENEW_MS);
  /** The lease this node last wrote, once {@link advertise} has run. */
  #lease: StoreLease | undefined;
  /**
   * The node of a lease of this store found at start and judged left behind by a
   * process no longer running (lease-watch.ts `awaitLeaseFree`): this node's predecessor on the
   * data dir, killed; undefined when there was none.
   */
  readonly leftBehind: string | undefined;
  /** Redis did not know this store though the data dir had a block (the claim at start): see {@link checkKnown}. */
  readonly #unknownAtStart: boolean;
  #blockLost = false;
  /**
   * True while the last re-assertion of the claim found (part of) the block held by
   * another store (a new data dir took it while this node was cut off from Redis):
   * that store may mint ids this store holds, so this store's records are not what
   * inboxes name now; reads go to the owner Redis names (src/cluster/store-router.ts).
   */
  get blockLost(): boolean {
    return this.#blockLost;
  }

  /** The store, once {@link advertise} has it: its counters are recorded from then on. */
  #store: OwnedStore | undefined;
  /** Its write fence's clock (options `monotonic`). */
  readonly #clock: () => number;
  /** The store's counters as Redis records them. */
  readonly #minted: MintedRecord;
  /** The store's writes' deadline, moved on by the renewals that find the lease this node's. */
  readonly #deadline: WriteDeadline;

  private constructor(opts: StoreOwnershipOptions, block: ClaimedBlock) {
    this.#opts = opts;
    this.leftBehind = block.leftBehind;
    this.#unknownAtStart = block.unknownAtStart;
    this.layout = block.layout;
    this.storeId = block.layout.storeId;
    this.partitionBase = block.base;
    this.partitions = opts.partitions;
    this.#description = block.description;
    this.#minted = new MintedRecord(opts.claims, this);
    this.#clock = opts.monotonic ?? (() => performance.now());
    this.#deadline = new WriteDeadline(this.#minted, opts.logger, this.storeId);
  }

  /**
   * Claims (first start of the data dir) or re-asserts its block, and pins the base in
   * the LAYOUT file (block-claim.ts {@link claimBlock}). Run before the store opens.
   * @throws StartupError, PixiuError as {@link claimBlock}
   */
  static async claim(opts: StoreOwnershipOptions): Promise<StoreOwnership> {
    return new StoreOwnership(opts, await claimBlock(opts));
  }

  /**
   * At start, once the store is open: a data dir that claimed its block on an earlier
   * start, and stored messages, whose store this Redis does not know (no description
   * of it) — Redis lost its data while the node was stopped (restarted without its
   * AOF, flushed, restored from before the store's first start), or this is another
   * Redis or key prefix than the one it ran with — is logged at error, naming what is
   * lost. Not refused: after a real loss of Redis's data the service must go on (another
   * prefix while nodes run under the recorded one was refused before: prefix-guard.ts).
   * @param store the opened store: whether it stored anything (a counter above 0)
   * @param hintOf a sentence to add, read only when logging (e.g. that the data dir
   *   holds an embedded Redis's files)
   * @returns true when it was logged
   */
  async checkKnown(store: MintingStore, hintOf?: () => Promise<string | undefined>): Promise<boolean> {
    if (!this.#unknownAtStart || !store.counters.some((c) => c > 0)) return false;
    const hint = await hintOf?.();
    this.#opts.logger.error({ store: this.storeId, dir: this.#opts.dir, redis: this.#opts.redisName, ...(hint === undefined ? {} : { hint }) },
      'this Redis does not know this data dir\'s store, which has stored messages: Redis lost its data while this node was stopped, '
      + `or it is another Redis or key prefix than the one this data dir ran with; ${FORGOTTEN_EFFECTS}`);
    return true;
  }

  /**
   * Brings a store that is behind the ids it already minted (DESIGN.md §2: a MsgID is
   * minted once) up to them: its node recorded its counters in Redis (every renewal and
   * at shutdown), and a data dir whose counters are lower — an older copy whose copy
   * ran elsewhere, a restore from a backup, writes lost to a power cut with relaxed
   * durability — would mint those ids again for other messages (inboxes holding them
   * would take the new messages for duplicates, or show their content for another
   * message). So does one whose block another store held meanwhile (a new data dir that
   * took it while Redis had lost the claims). Its counters are moved forward instead,
   * {@link RESUME_MARGIN} past the highest any store recorded (a copy may have minted
   * up to one renewal's worth more than it recorded before it was killed), and this is
   * logged at error: the messages behind those ids are not in this data dir (they read
   * as missing: `gap`s, 404). A restore that brings Redis's record back with the data
   * dir (the embedded Redis's AOF is inside it) leaves nothing to see here: the serving
   * node's time floor, applied after this, covers it (src/store/time-floor.ts).
   * @param store the opened store: its counters, and how to move them
   * @returns the partitions moved forward, as `partition p: a → b` (empty when none)
   * @throws PixiuError UNAVAILABLE when Redis or the store fails
   */
  async catchUpMinted(store: MintingStore): Promise<string[]> {
    const moved = await this.#minted.movePastRecorded(store, true);
    if (moved.length === 0) return moved;
    this.#opts.logger.error({ store: this.storeId, dir: this.#opts.dir, moved },
      'this data dir is behind the message ids its store already minted (an older copy of it ran on, a backup was restored, or writes were lost), or another store minted in its partitions: '
      + 'its counters are moved past them so no id is minted twice; the messages behind those ids are not in this data dir and read as missing');
    return moved;
  }

  /**
   * Records the store's counters now (shutdown, once the store is closed); a failure is
   * logged at warn. Never rejects.
   */
  async recordMintedNow(): Promise<void> {
    await this.#recordMintedLogged('warn');
  }

  /**
   * Records the store's counters; a failure is logged at `level` (debug for the interim
   * record of {@link stop}: the final one, once the store is closed, warns for both, so
   * a Redis down at shutdown is one warning, not two). Never rejects.
   */
  async #recordMintedLogged(level: 'debug' | 'warn'): Promise<void> {
    await this.#minted.record(this.#store).catch((err: unknown) => this.#opts.logger[level]({ ...outageFields(err), store: this.storeId }, 'could not record the store\'s counters'));
  }

  /**
   * Writes the lease now, then renews it and re-asserts the claim {@link LEASE_RENEW_MS}
   * after each renewal began (at once after one slower than that). A failed renewal logs
   * and is tried again {@link LEASE_RETRY_MS} later: while the writes' deadline holds, so
   * that one failure does not stop writes (lease-watch.ts {@link LEASE_FENCE_MS}), and
   * past it, so that writes resume within about a second of Redis answering (and taking
   * writes) again — also after a hung link or Redis, which drops no connection (no
   * reconnect renews at once), and after Redis refused (full, a read-only replica: its
   * state reply, src/redis/state-replies.ts, whose words the fenced writes' refusal
   * gives). Past the deadline those failures are logged at most once a renewal period.
   * @param where where this node is read (its host name and pid are added)
   * @param onConflict called with a reason when another store holds the block, or
   *   another node this store's lease (writes must stop), and with undefined once
   *   neither holds — also after the first lease write that finds neither: a node
   *   starts with its writes suspended (service.ts), so that two copies of one data
   *   dir started together never both take puts before either has written its lease
   *   — once writes may resume after another node served the store, only after the
   *   counters moved past what it may have minted ({@link RESUME_MARGIN})
   * @param store the store: its last counters are recorded with each renewal, and
   *   moved forward before writes resume after a conflict; its writes' deadline is
   *   moved on by each renewal that finds the lease this node's (write-deadline.ts)
   * @param onLostWrites called with a reason when a renewal proves that Redis lost
   *   writes it had acknowledged to this node, so that acknowledged appends may be gone
   *   too: this store's claim is gone, or the lease found is this node's own with an
   *   older renewal count than one Redis acknowledged (a best effort: lost-writes.ts)
   * @throws PixiuError UNAVAILABLE when the first lease cannot be written
   */
  async advertise(where: Pick<StoreLease, 'url' | 'node'>, onConflict: (reason: string | undefined) => void, store?: OwnedStore,
    onLostWrites?: (reason: string) => void): Promise<void> {
    this.#store = store;
    const { claims, logger } = this.#opts;
    const base: StoreLease = {
      ...where, host: this.#description.host, ...(PID_NAMESPACE === undefined ? {} : { pidns: PID_NAMESPACE }),
      ...(BOOT_ID === undefined ? {} : { boot: BOOT_ID }), pid: process.pid,
    };
    let renewal = 0;
    /** The next lease to write: each write counts (a starting copy sees this node renew by it). */
    const next = (): StoreLease => {
      renewal += 1;
      this.#lease = { ...base, renewal };
      return this.#lease;
    };
    let written = false;
    const lost = new LostWrites({
      node: base.node, logger, fields: { store: this.storeId, redis: this.#opts.redisName }, evictions: this.#opts.evictions, onLostWrites,
    });
    let reported = false;
    const report = (conflict: string | undefined): void => {
      if (reported && conflict === this.#conflict) return;
      const first = !reported;
      reported = true;
      if (conflict !== undefined) logger.error({ store: this.storeId, reason: conflict }, 'store partitions not this node\'s alone: writes suspended');
      else if (!first) logger.warn({ store: this.storeId }, 'store partitions this node\'s alone again: writes resumed');
      this.#conflict = conflict;
      onConflict(conflict === undefined ? undefined : `message store writes are suspended: ${conflict}`);
    };
    const renew = async (): Promise<void> => {
      const answer = await claims.claim(this.storeId, this.partitions, this.partitionBase, this.#description);
      this.#blockLost = answer.kind !== 'held';
      if (answer.kind !== 'held') {
        report(claimRefusal(this.#opts.dir, this.partitionBase, this.partitions, answer));
        await claims.renewLease(this.storeId, next(), LEASE_TTL_MS);
        await this.#minted.record(this.#store);
        return;
      }
      // The description is written with the claim at start, and at every renewal (lost-writes.ts).
      if (!answer.known) lost.claimGone();
      // Before the lease is sent: Redis's TTL starts later, so the deadline is on the safe side.
      const since = this.#clock();
      const lease = next();
      const replaced = await claims.renewLease(this.storeId, lease, LEASE_TTL_MS);
      lost.leaseWritten(lease, replaced);
      // Each write finds this node's own lease, or none (lapsed, FLUSHALL) — the first
      // one also the lease awaitLeaseFree judged left behind. Any other is a live node's
      // (a copy that started in the moments between this node's check and this write).
      const other = replaced !== undefined && replaced.node !== base.node && !(!written && replaced.node === this.leftBehind) ? replaced : undefined;
      // No lease of this node's after its first write, however late this renewal: it
      // lapsed (or Redis lost it), or another node's was there. Remembered until the move.
      if (written && replaced?.node !== base.node) this.#deadline.lapsed();
      written = true;
      // Alone again after a conflict: not one put before the counters are past the other node's.
      if (other === undefined && this.#conflict !== undefined) await this.#deadline.movePastOthers(this.#store);
      if (other === undefined) await this.#deadline.confirmed(this.#store, since, this.#conflict !== undefined);
      report(other === undefined ? undefined : servedElsewhere(this.#opts.dir, this.storeId, other));
      await this.#minted.record(this.#store);
    };
    await renew();
    logger.info({ store: this.storeId, url: base.url }, 'store lease held');
    this.#renewNow = () => {
      if (this.#renewing !== undefined) return;
      const began = performance.now();
      this.#renewing = renew().then(() => LEASE_RENEW_MS - (performance.now() - began), (err: unknown) => {
        const writesFenced = this.#deadline.passed(this.#clock());
        // Redis answered, refusing (full, a read-only replica …): said so by the fenced
        // writes' 503 and /readyz. Redis refusing the connection itself (a password it
        // requires) is said too; the reconnect that ends it renews at once (service.ts).
        const refused = redisStateReason(err);
        this.#store?.leaseRenewalFailed(refused ?? claims.connectRefusal());
        // Tried again a second later, before the deadline and past it alike, so that
        // writes resume within about a second of Redis answering again: a Redis that
        // refused gives no sign when it takes writes again, nor does a link that hung
        // without dropping the connection (no reconnect to renew at once); past the
        // deadline every renewal period waited up to 5 s more (netfault's finding).
        // Past the deadline the failures are logged at most once a renewal period.
        const left = writesFenced ? this.#fencedFailures.take() : 0;
        if (left !== undefined) logger.warn({ ...outageFields(err), store: this.storeId, writesFenced, ...thinnedFields(left) }, 'store lease renewal failed');
        return LEASE_RETRY_MS;
      }).then((waitMs) => {
        this.#renewing = undefined;
        this.#renewIn(waitMs);
      });
    };
    this.#renewIn(LEASE_RENEW_MS);
  }

  /** Runs the next renewal in `waitMs` (at once when not positive), in place of any scheduled; nothing once stopped. */
  #renewIn(waitMs: number): void {
    clearTimeout(this.#timer);
    if (this.#renewNow === undefined) return;
    this.#timer = setTimeout(this.#renewNow, Math.max(0, waitMs));
    this.#timer.unref();
  }

  /**
   * Re-asserts the claim and renews the lease now (Redis is back after an outage: it
   * may have lost both, and other nodes cannot read this store's records until they
   * are written back). Does nothing before {@link advertise} or after {@link stop}.
   */
  renewNow(): void {
    this.#renewNow?.();
  }

  /** Stops renewing and drops this node's lease, if it is still in place. Idempotent; never rejects. */
  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#renewNow = undefined;
    await this.#renewing;
    // The counters so far (the service records them again once the store is closed,
    // and warns if that fails: this one's failure is debug), then only this node's own
    // lease (none before advertise): a copy's, found in its place, stays for the copy.
    await this.#recordMintedLogged('debug');
    if (this.#lease !== undefined) await this.#opts.claims.releaseLease(this.storeId, this.#lease);
  }
}
