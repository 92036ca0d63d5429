/**
 * Ingest: the path of a producer's message (DESIGN.md §1, §7). The content is stored
 * once in the message store (fsynced), then its MsgID is appended to every
 * recipient's inbox. Only when both are done is the message acknowledged.
 *
 * Retries: with the same `client_msg_id` the store answers the first MsgID, and the
 * inbox append is idempotent per MsgID, so a retry after any failure completes what
 * the first attempt left undone and never appends twice (DESIGN.md §7). Without a
 * `client_msg_id`, a retry stores and delivers a second message.
 */
import { MsgKind } from '../ids/msg-id.js';
import type { AppendResult, Flow, Inbox } from '../inbox/inbox.js';
import type { MessageStore, PutResult } from '../store/message-store.js';
import { PixiuError } from '../errors.js';
import type { ClientIdClaims } from '../cluster/client-id-claims.js';
import type { RecordReader } from '../store/record-reader.js';
import { roomNotFound, type Rooms } from '../rooms/membership.js';
import { RecipientOrder } from './recipient-order.js';
import { checkSameMessage } from './same-message.js';
import { otherStoresRecord, putOnce } from './claimed-store.js';
import { newMessage, type MessageTarget } from './new-message.js';
import { handedOn, type ClientGone } from './abandoned.js';
import { appendAll, rememberIfOnline, type AppendedHook } from './inbox-appends.js';
import { distinctRecipients, type IngestResult, type RoomIngestResult, type RoomMessageInput, type StoredIds, type UserMessageInput } from './shapes.js';

/** Dependencies of {@link Ingest}. */
export interface IngestDeps {
  readonly store: MessageStore;
  readonly inbox: Inbox;
  /** Room membership; without it room messages are refused. */
  readonly rooms?: Rooms;
  readonly onAppended?: AppendedHook;
  /**
   * Claims of `client_msg_id`s across the stores sharing Redis (DESIGN.md §3, §9;
   * src/cluster/client-id-claims.ts), and the reader of other stores' records that
   * answers a retry stored by another node. Without them, idempotency holds per store.
   */
  readonly claims?: ClientIdClaims;
  readonly records?: RecordReader;
}

/** The ingest path for user messages. */
export class Ingest {
  readonly #deps: IngestDeps;

  constructor(deps: IngestDeps) {
    this.#deps = deps;
  }

  /**
   * Stores a user message and appends it to every recipient's inbox.
   *
   * @param named its distinct recipients, when the caller has them ({@link distinctRecipients})
   * @param gone asked right before the message is stored: its client has left (abandoned.ts)
   * @param storedIds given: its [0] is set to the MsgID once the message is stored (or
   *   found stored under its client_msg_id), so a failure after that can be logged with it
   * @throws PixiuError PAYLOAD_TOO_LARGE when the encoded message is over the limit
   *   (nothing stored); UNAVAILABLE when the store or Redis failed part-way (retry
   *   with the same `client_msg_id` to complete it); INVALID_REQUEST for a value the
   *   store refuses; RequestAbandoned (abandoned.ts) when `gone` said so (nothing stored)
   */
  async sendToUsers(input: UserMessageInput, named: readonly string[] = distinctRecipients(input), gone?: ClientGone, storedIds?: StoredIds): Promise<IngestResult> {
    const put = await this.#store(input, { kind: MsgKind.user, to: named }, gone);
    if (storedIds !== undefined) storedIds[0] = put.id;
    return this.#append(put, input, named, undefined);
  }

  /**
   * Sends a batch of user messages. Every message is stored at once, and each one's
   * appends are issued as soon as it is stored and every earlier message of the batch
   * that names one of its recipients has had its appends issued: a user named by
   * several messages gets them in the batch's order (appends go out on one Redis
   * connection in the order issued), while messages with no recipient in common need
   * not wait for each other — the appends of messages stored in a fast partition go
   * out while a slower partition is still writing. The batch's appends are one flow of
   * the append pipeline (tick-pipeline.ts): they keep that order, and take turns with
   * other requests' instead of holding them up. The messages are independent: each
   * settles alone, with its result or the error {@link sendToUsers} would have thrown
   * for it.
   *
   * The flow also makes them land in that order: Redis may refuse one append (a state
   * reply: BUSY, OOM, READONLY …) and run the next, already sent, to the same user; that
   * one is refused too (`Inbox.orderedFlow`), 503 as the earlier item, so the producer's
   * retry appends both in order.
   *
   * A message whose client has left before it is stored (`gone`) fails with
   * RequestAbandoned (abandoned.ts), an UNAVAILABLE: the ones after it are held back as
   * after a 503, each failed with an UNAVAILABLE of its own (abandoned.ts `handedOn`:
   * they are stored, not abandoned).
   *
   * @param flow the append pipeline's flow (default: a new `Inbox.orderedFlow`); a batch
   *   sent as several runs passes one for all of them, so a failure of one run's appends
   *   fails the appends of the runs after it too (tick-pipeline.ts `#broken`)
   * @param gone asked right before each message is stored, as {@link sendToUsers}'s
   * @param storedIds as {@link sendToUsers}'s, by input index
   * @returns one settled result per input, in order
   */
  sendBatch(
    inputs: readonly UserMessageInput[], flow: Flow = this.#deps.inbox.orderedFlow(), gone?: ClientGone, storedIds?: StoredIds,
  ): Promise<PromiseSettledResult<IngestResult>[]> {
    const named = inputs.map(distinctRecipients);
    const order = new RecipientOrder(named);
    // The first item, in batch order, that failed 503 before its appends: the items
    // after it whose appends have not gone out fail with it; those before it go on,
    // also when their puts end after its failure (another partition, slower). The
    // flow is broken only once the run has settled, for the batch's later runs. `err`
    // is what they fail with (handedOn: not the item's own RequestAbandoned).
    let failed: { index: number; err: unknown } | undefined;
    const failedBefore = (i: number, err: unknown): unknown => {
      if (isUnavailable(err) && (failed === undefined || i < failed.index)) failed = { index: i, err: handedOn(err) };
      return err;
    };
    const append = (put: PutResult, input: UserMessageInput, recipients: readonly string[], i: number): Promise<IngestResult> => {
      if (storedIds !== undefined) storedIds[i] = put.id;
      return failed !== undefined && failed.index < i ? Promise.reject(failed.err) : this.#append(put, input, recipients, flow);
    };
    return Promise.allSettled(inputs.map((input, i) => {
      const recipients = named[i] ?? [];
      const stored = this.#store(input, { kind: MsgKind.user, to: recipients }, gone);
      // No recipient named twice: each message's appends go as soon as it is stored,
      // with none of the ordering's promise and closures per message.
      if (order.independent) {
        // (Its failure also stops the batch's later runs, one flow: messages.ts.)
        return stored.then((put) => append(put, input, recipients, i), (err: unknown) => {
          throw failedBefore(i, err);
        });
      }
      return new Promise<IngestResult>((resolve, reject) => {
        stored.then(
          (put) => order.release(i, () => append(put, input, recipients, i).then(resolve, reject)),
          (err: unknown) => order.release(i, () => reject(failedBefore(i, err))),
        );
      });
    })).then((results) => {
      if (failed !== undefined) this.#deps.inbox.breakFlow(flow, failed.err);
      return results;
    });
  }

  /**
   * A batch item failed before its appends (its store put, its room's members). When the
   * producer retries it (503 UNAVAILABLE: the store, Redis or another node failed),
   * nothing later of the batch (`flow`) may go ahead of it: its retry would land after
   * that (tick-pipeline.ts `breakFlow`): those fail with `err`, or, for a
   * RequestAbandoned, with an UNAVAILABLE of their own (abandoned.ts `handedOn`).
   * @returns `err`, to reject the item with
   */
  #failedBeforeAppends(flow: Flow, err: unknown): unknown {
    if (isUnavailable(err)) this.#deps.inbox.breakFlow(flow, handedOn(err));
    return err;
  }

  /**
   * Stores a room message once and appends its MsgID, with the room named, to the
   * inbox of every member who had joined when it was first sent (DESIGN.md §8): a
   * member added later never gets it, also not from a retry; a removed member gets
   * nothing new. A retry with the same `client_msg_id` appends to no one twice.
   *
   * @param size the room's members now, when the caller has just read them (the route,
   *   for the node's budget): not read again
   * @param gone as {@link sendToUsers}'s
   * @param storedIds as {@link sendToUsers}'s
   * @throws PixiuError NOT_FOUND for a room without members (nothing stored);
   *   PAYLOAD_TOO_LARGE, UNAVAILABLE, INVALID_REQUEST, RequestAbandoned as {@link sendToUsers}
   */
  async sendToRoom(input: RoomMessageInput, size?: number, gone?: ClientGone, storedIds?: StoredIds): Promise<RoomIngestResult> {
    const [outcome] = await this.sendRoomBatch([input], {}, size === undefined ? undefined : new Map([[input.room, size]]), gone, storedIds);
    if (outcome?.status !== 'fulfilled') throw outcome?.reason;
    return outcome.value;
  }

  /**
   * Members of a room now (0: no such room, or rooms are not available).
   * @throws PixiuError UNAVAILABLE when Redis fails
   */
  async roomSize(room: string): Promise<number> {
    return (await this.#deps.rooms?.size(room)) ?? 0;
  }

  /**
   * Sends room messages as {@link sendToRoom} does, in batch order: every message is
   * stored at once and the members of each are read, then the appends of all of them
   * are issued in batch order, so a member of several of the rooms (or of one room
   * named twice) gets them in the batch's order. Each message settles alone.
   *
   * @param flow as {@link sendBatch}'s
   * @param sizes rooms' members now, as the caller has just read them (the routes, for
   *   the recipient limits): those rooms' sizes are not read again
   * @param gone asked right before each message is stored, as {@link sendBatch}'s
   * @param storedIds as {@link sendBatch}'s
   * @returns one settled result per input, in order
   */
  async sendRoomBatch(
    inputs: readonly RoomMessageInput[], flow: Flow = this.#deps.inbox.orderedFlow(), sizes?: ReadonlyMap<string, number>, gone?: ClientGone,
    storedIds?: StoredIds,
  ): Promise<PromiseSettledResult<RoomIngestResult>[]> {
    const { rooms } = this.#deps;
    if (!rooms) return inputs.map(() => ({ status: 'rejected', reason: new PixiuError('INVALID_REQUEST', 'rooms are not available on this service') }));
    // One flow for the batch (by default): its appends keep batch order, and take turns with other requests'.
    const target = async (input: RoomMessageInput, i: number): Promise<{ put: PutResult; room: string; members: string[] }> => {
      // A room with no members takes no new message; a retry of one it took (the
      // members have all left since) is answered as any retry is.
      if ((sizes?.get(input.room) ?? await rooms.size(input.room)) === 0 && !(await this.#isRetry(input))) throw roomNotFound(input.room);
      // Its time on the clock of the join slots (Redis's), not this node's: see Rooms.messageTime.
      const put = await this.#store(input, { kind: MsgKind.room, room: input.room, ts: await rooms.messageTime(input.room) }, gone);
      if (storedIds !== undefined) storedIds[i] = put.id;
      // A retry of another message (another room, …) is refused here: `input.room` is the stored one.
      checkSameMessage(put, input);
      return { put, room: input.room, members: await rooms.membersAt(input.room, put.message.ts) };
    };
    // Items sharing a client_msg_id are handled one after another (docs/api.md): a later
    // one starts once the earlier one has stored (or failed), so whether it is a retry
    // (#isRetry, for a room now without members) is asked of what the earlier one did.
    const byKey = new Map<string, Promise<unknown>>();
    const targets = await Promise.allSettled(inputs.map((input, i) => {
      const cid = input.client_msg_id;
      const earlier = cid === undefined ? undefined : byKey.get(cid);
      const mine = earlier === undefined ? target(input, i) : earlier.then(() => target(input, i), () => target(input, i));
      if (cid !== undefined) byKey.set(cid, mine);
      return mine;
    }));
    return Promise.allSettled(targets.map((t) => {
      if (t.status === 'fulfilled') return this.#appendToMembers(t.value.put, t.value.room, t.value.members, flow);
      return Promise.reject(this.#failedBeforeAppends(flow, t.reason));
    }));
  }

  /**
   * True when a message is stored under `input`'s `client_msg_id` (the same message or
   * not: the put tells), in this store or, on a Redis shared with other stores, in
   * another (its claim names a message still there), or another store is storing one
   * under it now (the put answers 503, retry).
   */
  async #isRetry(input: RoomMessageInput): Promise<boolean> {
    const cid = input.client_msg_id;
    if (cid === undefined) return false;
    const { store, claims } = this.#deps;
    if ((await store.findByClientMsgId(cid)) !== null) return true;
    if (claims === undefined || !claims.active) return false;
    const claim = await claims.lookup(cid);
    if (claim.state === 'pending') return true;
    return claim.state === 'stored' && (await otherStoresRecord(this.#deps.records, claim.id)) !== undefined;
  }

  /**
   * Appends a stored room message to its members' inboxes. Every append is issued
   * before this first yields, which is what keeps {@link sendRoomBatch} in order.
   */
  async #appendToMembers(put: PutResult, room: string, members: readonly string[], flow: Flow): Promise<RoomIngestResult> {
    const { duplicate } = await appendAll(this.#deps, put, members, MsgKind.room, flow, { room });
    return { id: put.id, room, recipients: members.length, duplicate };
  }

  /**
   * Checks a message as the store would before storing it, storing nothing: what a
   * route asks when the node's recipient budget refuses it, so that a message refused
   * for itself gets its own error whatever the load (src/api/routes/batch-items.ts).
   * @param named a user message's distinct recipients, when the caller has them ({@link distinctRecipients})
   * @throws PixiuError PAYLOAD_TOO_LARGE over the size limit; INVALID_REQUEST for a
   *   value the store refuses
   */
  check(input: UserMessageInput | RoomMessageInput, named?: readonly string[]): void {
    const room = (input as { room?: string }).room;
    this.#deps.store.check(room === undefined
      ? newMessage(input, { kind: MsgKind.user, to: named ?? distinctRecipients(input as UserMessageInput) })
      : newMessage(input, { kind: MsgKind.room, room }));
  }

  /**
   * Stores the content once (or finds the first message of its `client_msg_id`), for its
   * recipients or its room; nothing when `gone` says its client has left (claimed-store.ts `putOnce`).
   */
  #store(input: UserMessageInput | RoomMessageInput, target: MessageTarget, gone: ClientGone | undefined): Promise<PutResult> {
    return putOnce(this.#deps, newMessage(input, target), gone);
  }

  /**
   * Appends a stored message to every recipient's inbox. Every append is issued before
   * this first yields, which is what keeps {@link sendBatch} in order per recipient.
   * A duplicate put whose `input` is another message rejects with CONFLICT first
   * (same-message.ts), appending nothing.
   * @param flow the append pipeline's flow to keep order in (tick-pipeline.ts); undefined
   *   outside a batch: a message to one user joins the flow all such appends share, one
   *   to many is a flow of its own, taking turns with the others
   */
  async #append(put: PutResult, input: UserMessageInput, named: readonly string[], flow: Flow | undefined): Promise<IngestResult> {
    checkSameMessage(put, input, named);
    const { inbox, onAppended, store } = this.#deps;
    // A retry answers for the recipients of the first request, which the store kept.
    const recipients = put.duplicate ? (put.message.to ?? named) : named;
    if (recipients.length === 1) {
      // The common case, without appendEach's array of results.
      const user = recipients[0] as string;
      let a: AppendResult;
      try {
        a = await inbox.append(user, put.id, MsgKind.user, { expiresAt: put.message.expiresAt }, flow);
      } catch (err) {
        throw await inbox.appendFailure(user, err);
      }
      // A duplicate too (see inbox-appends.ts `announce`).
      rememberIfOnline(store, put, [a]);
      onAppended?.(user, a, { seq: a.seq, id: put.id, kind: MsgKind.user }, put.message);
      return { id: put.id, recipients: [{ user, seq: a.seq }], duplicate: put.duplicate && a.duplicate };
    }
    const { appends, duplicate } = await appendAll(this.#deps, put, recipients, MsgKind.user, flow ?? {});
    return { id: put.id, recipients: appends.map((a, i) => ({ user: recipients[i] as string, seq: a.seq })), duplicate };
  }
}

/** True for a failure the producer retries (503): nothing later of its batch may go ahead of it. */
function isUnavailable(err: unknown): boolean {
  return err instanceof PixiuError && err.code === 'UNAVAILABLE';
}
