/**
 * Publishing a broadcast (DESIGN.md §8): the content is stored once in the message
 * store (kind broadcast, with its retention), then appended to the broadcast stream
 * that every node reads.
 */
import { MsgKind } from '../ids/msg-id.js';
import type { MessageStore } from '../store/message-store.js';
import type { BroadcastStream } from './broadcast-stream.js';
import type { TagFilter } from './filter.js';

/** A broadcast as `POST /v1/broadcast` takes it (already schema-validated). */
export interface BroadcastInput {
  readonly type: string;
  readonly data: unknown;
  readonly tags?: TagFilter;
  /** Retention in the store, seconds. */
  readonly ttl?: number;
}

/** The answer: the MsgID and the position in the broadcast stream. */
export interface BroadcastResult {
  readonly id: string;
  readonly bseq: string;
}

/**
 * Stores and publishes one broadcast.
 * @throws PixiuError PAYLOAD_TOO_LARGE over the message size limit (nothing stored);
 *   UNAVAILABLE when the store or Redis fails (a retry publishes it again: broadcasts
 *   are at-most-once per attempt)
 */
export async function publishBroadcast(store: MessageStore, stream: BroadcastStream, input: BroadcastInput): Promise<BroadcastResult> {
  const put = await store.put({
    kind: MsgKind.broadcast,
    type: input.type,
    data: input.data,
    ...(input.ttl !== undefined ? { ttlMs: input.ttl * 1000 } : {}),
  });
  const filter = input.tags && (input.tags.all?.length || input.tags.any?.length) ? input.tags : undefined;
  const bseq = await stream.publish({
    msgId: put.id, type: input.type, ts: put.message.ts, dataJson: JSON.stringify(input.data), filter, expiresAt: put.message.expiresAt,
  });
  return { id: put.id, bseq };
}
