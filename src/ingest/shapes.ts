/**
 * What a producer's user or room message is to ingest (ingest.ts), once the API has
 * validated it, and what the producer is answered (DESIGN.md §7, §8; docs/api.md
 * "Messages"): shared by the routes (src/api/routes), ingest and its steps.
 */

/** A user message as the API accepts it (already schema-validated). */
export interface UserMessageInput {
  /** One recipient or up to 1,000; repeats are delivered once. */
  readonly to: string | readonly string[];
  readonly from?: string;
  readonly type: string;
  /** Any JSON value. */
  readonly data: unknown;
  readonly client_msg_id?: string;
  /** Retention in seconds. */
  readonly ttl?: number;
}

/** A room message as the API accepts it (already schema-validated). */
export interface RoomMessageInput {
  readonly room: string;
  readonly from?: string;
  readonly type: string;
  readonly data: unknown;
  readonly client_msg_id?: string;
  /** Retention in seconds. */
  readonly ttl?: number;
}

/** What the producer of a room message is answered. */
export interface RoomIngestResult {
  readonly id: string;
  readonly room: string;
  /** Members whose inbox got it (those who were members when it was first sent). */
  readonly recipients: number;
  /** As {@link IngestResult.duplicate}. */
  readonly duplicate: boolean;
}

/** Where one recipient's copy landed. */
export interface RecipientSeq {
  readonly user: string;
  readonly seq: number;
}

/** What the producer is answered. */
export interface IngestResult {
  /** The MsgID. */
  readonly id: string;
  /** One per distinct recipient, in the order first named. */
  readonly recipients: RecipientSeq[];
  /**
   * True when nothing new happened: the `client_msg_id` was stored before and every
   * recipient's inbox already held the message. A retry that completed a partial
   * earlier attempt is not a duplicate.
   */
  readonly duplicate: boolean;
}

/** The recipients of a message, each once, in the order first named (also what a batch's recipient limit counts). */
export function distinctRecipients(input: UserMessageInput): string[] {
  return typeof input.to === 'string' ? [input.to] : [...new Set(input.to)];
}

/**
 * Filled by ingest, by message index (a single message: 0), with each message's MsgID
 * once it is stored or found stored under its `client_msg_id`: what a route logs with a
 * failure that came after (a 503 of its appends, a 409 naming the first message), so an
 * operator can tie a producer's retry to its first attempt (walk26 L1).
 */
export type StoredIds = (string | undefined)[];
