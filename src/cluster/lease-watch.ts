/**
 * The store lease as a starting node checks it (DESIGN.md §9: one store, one running
 * node): {@link awaitLeaseFree} waits until no other live node holds a store's lease,
 * and {@link servedElsewhere} is the error that names the node that does. The lease's
 * periods are here too; src/cluster/store-ownership.ts writes and renews it.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { StartupError } from '../errors.js';
import type { Logger } from '../logger.js';
import { isAlive } from '../process-alive.js';
import type { LeaseState, PartitionClaims, StoreLease } from './partition-claims.js';

/** Lease renewal (and claim re-assertion) period, ms: the node registry's heartbeat. */
export const LEASE_RENEW_MS = 5000;
/** A lease not renewed for this long lapses, ms (three missed renewals). */
export const LEASE_TTL_MS = 3 * LEASE_RENEW_MS;
/**
 * How long after the start of a renewal that confirmed its lease a node takes writes,
 * ms: the lease's TTL less one renewal period (src/store/write-fence.ts). The lease
 * lapses in Redis no sooner than {@link LEASE_TTL_MS} after that start (Redis sets its
 * TTL once the command reaches it), and only then may another node take the store; the
 * margin covers a write checked before the deadline and landing after it (a batch
 * built, then a slow fsync), the two clocks' rates, and leaves slack for renewals:
 * the next begins {@link LEASE_RENEW_MS} after the last one began, and one that fails
 * is tried again {@link LEASE_RETRY_MS} later (store-ownership.ts `advertise`). So one
 * failed renewal (Redis refusing a command, or timing it out) stops nothing; Redis
 * failing them for about 5 s does, as does one renewal still in flight at the deadline
 * (Redis answering slower than 5 s: until it returns, though Redis may hold the lease
 * a few seconds longer).
 */
export const LEASE_FENCE_MS = LEASE_TTL_MS - LEASE_RENEW_MS;
/**
 * After a failed renewal the next try, ms: while the writes' deadline has not passed,
 * several fit in the {@link LEASE_FENCE_MS} margin; past it, so that writes resume
 * within about a second of Redis answering again (store-ownership.ts `advertise`).
 * A reconnect to Redis renews at once (service.ts), but a link or a Redis that hung
 * (a partition that drops nothing, a frozen Redis) ends with no reconnect, and neither
 * does a Redis refusing writes (full, a read-only replica) give a sign when it takes
 * them again: past the deadline renewals went on only every {@link LEASE_RENEW_MS}, and
 * writes stayed refused up to ~5 s after Redis answered (a network-fault tester's
 * finding). The failures past the deadline are logged at most once a renewal period.
 */
export const LEASE_RETRY_MS = 1000;
/** How often a starting node looks again at a lease held by a node of another host, ms. */
export const LEASE_WATCH_MS = 250;
/** Longest such a watch lasts, ms: a lease's TTL and one renewal period. */
const LEASE_WATCH_LIMIT_MS = LEASE_TTL_MS + LEASE_RENEW_MS;
/**
 * This process's PID namespace (`pid:[4026531836]`), or undefined where /proc does not
 * say (not Linux). Containers sharing a host name (host networking) each have their
 * own: a pid is only meaningful within one.
 */
function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

/** {@link pidNamespace}, read once. */
export const PID_NAMESPACE = pidNamespace();

/**
 * This machine's boot id (`/proc/sys/kernel/random/boot_id`: a random UUID the kernel
 * draws at each boot), or undefined where there is none (not Linux). Host name and PID
 * namespace do not tell two machines apart: host names repeat (cloned VMs, `localhost`,
 * hosts named by configuration management), and the root PID namespace is
 * `pid:[4026531836]` on every Linux host. The boot id does; the containers of one host
 * share it, and their PID namespaces tell them apart.
 */
function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** {@link bootId}, read once. */
export const BOOT_ID = bootId();

/**
 * True when `lease` was written by a process of this machine, in this PID namespace,
 * since it last booted: its pid then names a process here (alive or not). A lease of an
 * older release, which names no boot id, by host name and PID namespace alone.
 */
function ofThisMachine(lease: StoreLease): boolean {
  return lease.host === os.hostname() && lease.pidns !== undefined && lease.pidns === PID_NAMESPACE
    && (lease.boot === undefined || lease.boot === BOOT_ID);
}

/** The start-up error for a store another live node serves. */
export function servedElsewhere(dir: string, storeId: string, lease: StoreLease): string {
  const where = [lease.host === undefined ? '' : `host ${lease.host}`, lease.pid === undefined ? '' : `pid ${lease.pid}`].filter(Boolean).join(', ');
  return `the store in ${dir} (store ${storeId}) is already served by node ${lease.node} at ${lease.url}${where === '' ? '' : ` (${where})`}: `
    + 'another node serves this data dir\'s store (this folder started twice, or a copy of it). Two nodes serving one store mint the same message ids and lose messages. '
    + 'Stop that node first, or give this node a data dir of its own (never a copy of another node\'s)';
}

/** True when `now` is `before` written again by its node (or by another node). */
function renewedSince(before: LeaseState, now: LeaseState): boolean {
  if (now.lease.node !== before.lease.node) return true;
  // A lease of this release counts its writes; one of an older release shows a renewal
  // only by its time left growing (which a step of Redis's clock can fake).
  if (now.lease.renewal !== undefined || before.lease.renewal !== undefined) return now.lease.renewal !== before.lease.renewal;
  return now.ttlMs > before.ttlMs;
}

/**
 * Waits until no other live node holds `storeId`'s lease (DESIGN.md §9: one store, one
 * node). No lease: at once. A lease of a process of this machine (same host name, PID
 * namespace and boot id: {@link ofThisMachine}) that is gone (a crash left it): at
 * once. Any other (a live pid of this
 * machine, which may also be a reused one — a container restarted after a crash runs
 * under the pid it had —, another host or container, an older release): watched every
 * {@link LEASE_WATCH_MS} until it lapses (its node is gone; up to {@link LEASE_TTL_MS}),
 * refused as soon as it is written again (its node is alive, and renews every
 * {@link LEASE_RENEW_MS}).
 * @returns the node id of a lease it found and judged left behind (its first write
 *   may replace that one: see {@link StoreOwnership.advertise}), if any
 * @throws StartupError when another live node holds the lease
 * @throws PixiuError UNAVAILABLE when Redis fails
 */
export async function awaitLeaseFree(claims: PartitionClaims, storeId: string, dir: string, logger: Logger): Promise<string | undefined> {
  let held: LeaseState | undefined = await claims.leaseState(storeId);
  if (held === undefined) return undefined;
  const first = held.lease;
  if (ofThisMachine(first) && first.pid !== undefined && first.pid !== process.pid && !isAlive(first.pid)) return first.node;
  logger.warn({ store: storeId, node: first.node, url: first.url, host: first.host },
    `store lease held by another node, or left by a run of this one that crashed (in another container or PID namespace, or before this machine last booted): waiting up to ${LEASE_WATCH_LIMIT_MS / 1000} s — a live node renews it, a crashed one's lapses`);
  const deadline = performance.now() + LEASE_WATCH_LIMIT_MS;
  while (performance.now() < deadline) {
    await delay(LEASE_WATCH_MS);
    const now: LeaseState | undefined = await claims.leaseState(storeId);
    if (now === undefined) {
      logger.info({ store: storeId, node: first.node }, 'store lease lapsed: its node is gone, this node serves the store');
      return undefined;
    }
    // Renewed, or taken by yet another node: someone serves it.
    if (renewedSince(held, now)) throw new StartupError(servedElsewhere(dir, storeId, now.lease));
    held = now;
  }
  // Never renewed, yet still there (written with a longer TTL by something else): nobody serves it.
  return first.node;
}

