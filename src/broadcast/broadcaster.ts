/**
 * Publishing a broadcast (DESIGN.md §8): the content is stored once in the message
 * store (kind broadcast, with its retention), then appended to the broadcast stream
 * that every node reads.
 *
 * Retries: with a `client_msg_id` the store answers the first MsgID (putOnce, as for
 * a message: across the nodes sharing Redis too), and the stream append is guarded by
 * a marker keyed by the MsgID, set in one script with the append
 * (broadcast-publish-2.lua); so a retry after any failure — the put done and the
 * append failed, or the append done and its reply lost — completes the broadcast and
 * never appends it twice (docs/decisions.md, "Broadcast"). Without a `client_msg_id`,
 * a retry publishes a second broadcast.
 */
import type { ClientIdClaims } from '../cluster/client-id-claims.js';
import type { ClientGone } from '../ingest/abandoned.js';
import type { StoredIds } from '../ingest/shapes.js';
import { putOnce } from '../ingest/claimed-store.js';
import { checkSameBroadcast, keyConflict } from '../ingest/same-message.js';
import { MsgKind } from '../ids/msg-id.js';
import type { MessageStore, NewMessage } from '../store/message-store.js';
import type { RecordReader } from '../store/record-reader.js';
import type { BroadcastAppend, BroadcastStream } from './broadcast-stream.js';
import { filterKey, type TagFilter } from './filter.js';

/** A broadcast as `POST /v1/broadcast` takes it (already schema-validated). */
export interface BroadcastInput {
  readonly type: string;
  readonly data: unknown;
  readonly tags?: TagFilter;
  /** Retention in the store, seconds. */
  readonly ttl?: number;
  /** The producer's idempotency key, 1–128 printable ASCII characters (DESIGN.md §2). */
  readonly client_msg_id?: string;
}

/** The answer: the MsgID and the position in the broadcast stream. */
export interface BroadcastResult {
  readonly id: string;
  readonly bseq: string;
  /**
   * True when nothing new happened: the `client_msg_id` was stored and its broadcast
   * appended before. A retry that completed a partial earlier attempt is not a duplicate.
   */
  readonly duplicate: boolean;
}

/** What publishing needs. */
export interface BroadcasterDeps {
  readonly store: MessageStore;
  readonly stream: BroadcastStream;
  /** `client_msg_id` claims across the stores sharing Redis (as ingest's, src/cluster/client-id-claims.ts). */
  readonly claims?: ClientIdClaims | undefined;
  /** Reads other stores' records: a retry another node stored is answered with its record. */
  readonly records?: RecordReader | undefined;
}

/**
 * Stores and publishes one broadcast; with a `client_msg_id`, once (see the module comment).
 * @param gone asked right before it is stored: its client has left (src/ingest/abandoned.ts)
 * @throws RequestAbandoned (src/ingest/abandoned.ts) when `gone` said so: nothing stored
 *   or published
 * @throws PixiuError PAYLOAD_TOO_LARGE over the message size limit (nothing stored);
 *   CONFLICT when the `client_msg_id` names another message: not a broadcast, or one
 *   with another type, data or tags (nothing appended); UNAVAILABLE when the store or
 *   Redis fails (retry with the same `client_msg_id` to complete it; without one a
 *   retry publishes it again: broadcasts are at-most-once per attempt)
 * @param storedIds given: its [0] is set to the MsgID once stored (or found stored under
 *   its client_msg_id), for the log line of a failure after that (a 409, a 503: walk29 F2)
 */
export async function publishBroadcast(deps: BroadcasterDeps, input: BroadcastInput, gone?: ClientGone, storedIds?: StoredIds): Promise<BroadcastResult> {
  const msg: NewMessage = { kind: MsgKind.broadcast, type: input.type, data: input.data };
  if (input.ttl !== undefined) msg.ttlMs = input.ttl * 1000;
  if (input.client_msg_id !== undefined) msg.clientMsgId = input.client_msg_id;
  const put = await putOnce(deps, msg, gone);
  if (storedIds !== undefined) storedIds[0] = put.id;
  checkSameBroadcast(put, input);
  const filter = input.tags && (input.tags.all?.length || input.tags.any?.length) ? input.tags : undefined;
  // The record's own fields: a retry appends the first attempt's time, data and expiry.
  const first = put.message;
  const entry: BroadcastAppend = {
    msgId: put.id, type: first.type, ts: first.ts, dataJson: JSON.stringify(first.data), filter, expiresAt: first.expiresAt,
  };
  if (input.client_msg_id === undefined) return { id: put.id, bseq: await deps.stream.publish(entry), duplicate: false };
  const key = filterKey(filter);
  const published = await deps.stream.publishOnce(entry, key);
  if (published.before && published.filterKey !== key) throw keyConflict(put, 'its tags differ', 'broadcast');
  return { id: put.id, bseq: published.bseq, duplicate: put.duplicate && published.before };
}
