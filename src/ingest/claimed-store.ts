/**
 * Storing a message under a `client_msg_id` on a Redis shared with other stores
 * (DESIGN.md §3, §9): the id is claimed first (src/cluster/client-id-claims.ts), so a
 * retry another node stored is answered with that node's message, not stored again.
 */
import type { ClientIdClaims } from '../cluster/client-id-claims.js';
import { PixiuError, unavailable } from '../errors.js';
import type { MessageStore, NewMessage, PutResult } from '../store/message-store.js';
import type { RecordReader } from '../store/record-reader.js';
import { isUnreadable } from '../store/unreadable.js';
import { RequestAbandoned, type ClientGone } from './abandoned.js';

/** What {@link putOnce} needs besides the message. */
export interface OnceDeps {
  readonly store: MessageStore;
  /**
   * Claims of `client_msg_id`s across the stores sharing Redis (DESIGN.md §3, §9);
   * without them, or while they are not active (one store on the Redis), the store's own
   * index alone answers a retry.
   */
  readonly claims?: ClientIdClaims | undefined;
  /** Reads other stores' records, to answer a retry another node stored. */
  readonly records?: RecordReader | undefined;
}

/**
 * Stores a message once per `client_msg_id` (DESIGN.md §3): the store's put, or, on a
 * Redis shared with other stores, {@link storeClaimed}. Without `msg.clientMsgId`, a
 * plain put. What a user or room message (ingest.ts) and a broadcast (src/broadcast)
 * store through.
 *
 * When `gone` says the request's client has left (abandoned.ts), nothing is stored: asked
 * before the claim and again right before the put, after the claim's round trip to
 * Redis (the wait a stale attempt spends there), whose claim is then released. Once the
 * put is made the message is stored whatever the client does.
 * @param gone asked before storing; undefined: never abandoned
 * @throws PixiuError as `MessageStore.put` and {@link storeClaimed};
 *   {@link RequestAbandoned} when `gone` says so before the put (nothing stored)
 */
export function putOnce(deps: OnceDeps, msg: NewMessage, gone?: ClientGone): Promise<PutResult> {
  const { store, claims } = deps;
  if (gone?.() === true) return Promise.reject(new RequestAbandoned());
  const cid = msg.clientMsgId;
  if (cid === undefined || claims === undefined || !claims.active) return store.put(msg);
  return storeClaimed(store, deps.records, msg, cid, claims, gone);
}

/**
 * Stores `msg` under `cid` after claiming it, or answers the first message another
 * store stored under it.
 * @param records reads other stores' records (undefined: none can be read, a claim of
 *   another store's message is taken for gone)
 * @param gone asked once the claim is answered, before the put (see {@link putOnce})
 * @throws PixiuError UNAVAILABLE when another node is storing it now, or its record
 *   cannot be read now (its node is stopped), or Redis fails; {@link RequestAbandoned}
 *   when `gone` says so before the put (the claim released, nothing stored)
 */
export async function storeClaimed(
  store: MessageStore, records: RecordReader | undefined, msg: NewMessage, cid: string, claims: ClientIdClaims, gone?: ClientGone,
): Promise<PutResult> {
  try {
    return await storeUnderClaim(store, records, msg, cid, claims, gone);
  } finally {
    // What a claim or settle that got no reply left is cleared only with no attempt under way.
    claims.end(cid);
  }
}

/** {@link storeClaimed} within its attempt (`claims.claim` to `claims.end`). */
async function storeUnderClaim(
  store: MessageStore, records: RecordReader | undefined, msg: NewMessage, cid: string, claims: ClientIdClaims, gone: ClientGone | undefined,
): Promise<PutResult> {
  const claim = await claims.claim(cid);
  if (claim.state === 'pending') throw storingElsewhere(cid);
  if (claim.state === 'stored' && !store.holds(claim.id)) {
    const first = await otherStoresRecord(records, claim.id);
    if (first !== undefined) return first;
    // Expired (or its store retired): stored anew here, and the claim is this store's.
  }
  // The claim may have waited long (Redis paused, this node starved), its producer
  // retrying elsewhere meanwhile: a client gone by now gets nothing stored, and its
  // claim is dropped at once (awaited: nobody waits for this answer) so that the retry
  // on another node is not refused as "being stored by another node" for 30 s.
  if (gone?.() === true) {
    if (claim.state === 'mine') await claims.release(cid);
    throw new RequestAbandoned();
  }
  let put: PutResult;
  try {
    put = await store.put(msg);
  } catch (err) {
    if (claim.state === 'mine') void claims.release(cid);
    throw err;
  }
  if (claim.state === 'stored' && claim.id === put.id) return put;
  const settled = await claims.settle(cid, put.id, put.message.expiresAt, claim.state === 'stored' ? claim.id : '');
  if (settled.state === 'stored' && settled.id === put.id) return put;
  // This node stalled past its claim's expiry and another store claimed, stored and
  // settled it meanwhile: that message is the one (its own copy here stays unnamed,
  // appended nowhere, until it expires).
  if (settled.state !== 'stored') throw storingElsewhere(cid);
  const first = await otherStoresRecord(records, settled.id);
  if (first === undefined) throw unavailable(`the message first stored under client_msg_id ${JSON.stringify(cid)} cannot be read now; retry`);
  return first;
}

/**
 * A retry's answer from another store's first message (same-message.ts compares it
 * with the retry, as with a local one); undefined when it is gone (expired, its store
 * retired) or its stored bytes cannot be decoded (the retry is then stored anew, as for
 * a local first record that cannot be decoded).
 * @throws PixiuError UNAVAILABLE when its node cannot be read now, or no store claims
 *   its partition now
 */
export async function otherStoresRecord(records: RecordReader | undefined, id: string): Promise<PutResult | undefined> {
  // getMany, not get: the id comes from a claim, not a caller, so a partition no store
  // claims now (Redis lost the claims, and its owner has not written them back yet) is
  // UNAVAILABLE, not "gone" — taken for gone, it was stored a second time right after
  // a FLUSHALL (a fresh try of the claims).
  const [first] = (await records?.getMany([id])) ?? [];
  if (first === null || first === undefined) return undefined;
  // Its bytes cannot be decoded (src/store/unreadable.ts; its store logs that): taken
  // for gone, as an expired one is, so the retry is stored anew here — as a local first
  // record that cannot be decoded is (partition.ts).
  if (isUnreadable(first)) return undefined;
  return { id, duplicate: true, message: first, bytes: NO_BYTES };
}

/**
 * The refusal of a `client_msg_id` another store has claimed and not stored yet: it is
 * storing it now, or crashed while storing it (its claim then lapses within 30 s, or
 * clears at once when that node is back and takes the retry). The producer retries.
 */
function storingElsewhere(cid: string): PixiuError {
  return unavailable(`a message with client_msg_id ${JSON.stringify(cid)} is being stored by another node now, `
    + 'or was when that node stopped (its claim lapses within 30 s; a retry sent to that node completes at once); retry');
}

/** The bytes of a record read from another store: not cached here (`MessageStore.remember`). */
const NO_BYTES = Buffer.alloc(0);
