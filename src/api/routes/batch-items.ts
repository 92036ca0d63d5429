/**
 * Rules over the items of one `POST /v1/messages/batch` taken together (docs/api.md,
 * "Messages"): who owns a `client_msg_id` that several items name, and how many
 * recipients the whole batch may reach. Each item is checked alone first (messages.ts);
 * these see the batch in order and replace an item by its error, so it fails alone.
 */
import { PixiuError } from '../../errors.js';
import { isWrongTypeFailure } from '../../redis/wrong-type.js';
import { distinctRecipients, type RoomMessageInput, type UserMessageInput } from '../../ingest/shapes.js';
import type { InProgressBudget } from './ingest-budget.js';

/** A batch item as validated: a user message (`to`) or a room message (`room`). */
export type MessageBody = (UserMessageInput | RoomMessageInput) & { to?: UserMessageInput['to']; room?: string };

/** Whether a validated item is a room message (it names a `room`, not `to`: DESIGN.md §8). */
export function isRoomMessage(body: MessageBody): body is RoomMessageInput & MessageBody {
  return body.room !== undefined;
}

/** Consecutive items of one kind, in batch order ({@link runsOfOneKind}), each with its index in the batch. */
export type BatchRun =
  | { readonly room: false; readonly items: { readonly item: UserMessageInput; readonly index: number }[] }
  | { readonly room: true; readonly items: { readonly item: RoomMessageInput; readonly index: number }[] };

/**
 * Splits a batch's valid items into runs of consecutive items of one kind (user or
 * room), in batch order. Ingest keeps batch order within a run; the runs are sent one
 * after another, so a user named by a user item and reached by a room item gets them
 * in batch order too (docs/api.md): user items are appended as soon as stored, room
 * items only once their members are read, so sent together a later user item went
 * first. A batch of one kind is one run, sent as before.
 * @param checked the checked items, in batch order; errors are left out of the runs
 */
export function runsOfOneKind(checked: readonly (MessageBody | PixiuError)[]): BatchRun[] {
  const runs: BatchRun[] = [];
  checked.forEach((item, index) => {
    if (item instanceof PixiuError) return;
    const room = isRoomMessage(item);
    const last = runs.at(-1);
    if (last !== undefined && last.room === room) (last.items as { item: MessageBody; index: number }[]).push({ item, index });
    else runs.push(room ? { room: true, items: [{ item, index }] } : { room: false, items: [{ item: item as UserMessageInput, index }] });
  });
  return runs;
}

/**
 * The items whose `client_msg_id` an earlier valid item of the other kind names: they
 * are refused with CONFLICT at send time ({@link BatchKeys}) unless that earlier item is
 * refused with a 4xx, so they are not counted against the batch's recipient limit
 * beforehand (counted, a refused item pushed valid later items past it).
 */
export function crossKindRepeats(checked: readonly (MessageBody | PixiuError)[]): Set<number> {
  const first = new Map<string, boolean>();
  const repeats = new Set<number>();
  checked.forEach((c, i) => {
    if (c instanceof PixiuError || c.client_msg_id === undefined) return;
    const room = isRoomMessage(c);
    const earlier = first.get(c.client_msg_id);
    if (earlier === undefined) first.set(c.client_msg_id, room);
    else if (earlier !== room) repeats.add(i);
  });
  return repeats;
}

/**
 * Who holds each `client_msg_id` of one batch across its runs ({@link runsOfOneKind}):
 * one key, one message, and the first item in the batch that is stored under it is
 * that message (docs/api.md, "Messages": items sharing a key are handled as if sent one
 * after another). Items of one kind need no help: ingest stores a run in batch order, so
 * the first one's put takes the key and the later ones meet it as duplicates (or
 * conflicts). Across kinds (a room item, then a user item, or the reverse) the later
 * run is refused with CONFLICT here, before it is sent, if the earlier item holds the
 * key: it was stored, or it failed in a way that may have stored it (5xx: its retry
 * decides). An earlier item refused with a 4xx (a room not found) stored nothing, so
 * the key is free for the later one, as for two requests sent one after another.
 */
export class BatchKeys {
  readonly #first = new Map<string, { index: number; room: boolean }>();
  readonly #freed = new Set<number>();

  /**
   * Item `index` (of kind `room`) is about to be sent: answers its CONFLICT when an
   * earlier item of the other kind holds its key, else undefined (and it may hold it).
   */
  admit(item: MessageBody, index: number): PixiuError | undefined {
    const key = item.client_msg_id;
    if (key === undefined) return undefined;
    const room = isRoomMessage(item);
    const earlier = this.#first.get(key);
    if (earlier === undefined || this.#freed.has(earlier.index)) {
      this.#first.set(key, { index, room });
      return undefined;
    }
    if (earlier.room === room) return undefined;
    return new PixiuError('CONFLICT', `client_msg_id ${JSON.stringify(key)} was first used for another message `
      + `(item ${earlier.index} of this batch, sent to ${earlier.room ? 'a room' : 'users'}); send a new message with a new client_msg_id`);
  }

  /** Item `index` was sent: a 4xx refusal stored nothing under its key, which it then no longer holds. */
  settled(index: number, outcome: PromiseSettledResult<unknown>): void {
    if (outcome.status === 'rejected' && outcome.reason instanceof PixiuError && outcome.reason.status < 500) this.#freed.add(index);
  }
}

/**
 * Holds the batch to `max` recipients in all (setting `batchMaxRecipients`, default
 * 100,000: 100 messages to 1,000 users each). Every recipient is an inbox append; a
 * batch of 1,000 messages to 1,000 users each took minutes and gigabytes of memory.
 * Counting in batch order (a user item its distinct recipients, a room item its
 * members now), the item that goes past the limit and every item after it are refused
 * with INVALID_REQUEST, so what is sent is a prefix of the batch and what is refused
 * can be sent as the next batch, in order.
 *
 * @param checked the items, in batch order (errors kept as they are; they count nothing)
 * @param roomSize members of a room now (each room named is read once)
 * @returns the items, those refused replaced by their error, the recipients of the
 *   items kept, and the rooms' sizes as read (for ingest, not to read them again)
 * @throws PixiuError UNAVAILABLE when a room's size cannot be read (nothing is sent); a
 *   room a key of which has the wrong type is not thrown but replaces its items (their
 *   500 INTERNAL, src/redis/wrong-type.ts)
 */
export async function limitRecipients(
  checked: readonly (MessageBody | PixiuError)[], max: number, roomSize: (room: string) => Promise<number>,
  uncounted: ReadonlySet<number> = new Set(),
): Promise<{ items: (MessageBody | PixiuError)[]; recipients: number; recipientsOf: (item: MessageBody) => number; sizes: ReadonlyMap<string, number> }> {
  const rooms = [...new Set(checked.flatMap((c) => (c instanceof PixiuError || !isRoomMessage(c) ? [] : [c.room])))];
  const sizes = new Map<string, number>();
  // A room a key of which has the wrong type: its items fail alone (no retry cures it), as a recipient's does.
  const broken = new Map<string, PixiuError>();
  await Promise.all(rooms.map(async (room) => {
    try {
      sizes.set(room, await roomSize(room));
    } catch (err) {
      if (!isWrongTypeFailure(err)) throw err;
      broken.set(room, err);
    }
  }));
  const recipientsOf = (c: MessageBody): number => (isRoomMessage(c) ? sizes.get(c.room) ?? 0 : distinctRecipients(c as UserMessageInput).length);
  let total = 0;
  let over: number | undefined;
  const items = checked.map((c, i) => {
    if (c instanceof PixiuError) return c;
    const failed = isRoomMessage(c) ? broken.get(c.room) : undefined;
    if (failed !== undefined) return failed;
    if (over === undefined) {
      // Most likely refused for its key at send time (BatchKeys): counted only if admitted.
      if (uncounted.has(i)) return c;
      const n = recipientsOf(c);
      if (total + n <= max) {
        total += n;
        return c;
      }
      over = i;
    }
    return overLimit(i, max, over, `send items ${over} and after in another batch`);
  });
  return { items, recipients: total, recipientsOf, sizes };
}

/**
 * Item `index`'s error as the batch answers it: a message over the size limit
 * (PAYLOAD_TOO_LARGE, which ingest finds once it encodes the message, not knowing the
 * item's place) is named by its place, as the item's refusals found before it is sent
 * are (`messages/3: message is 65537 bytes …`, docs/api.md "Errors"). Others as they are.
 */
export function placedItemError(e: PixiuError, index: number): PixiuError {
  if (e.code !== 'PAYLOAD_TOO_LARGE' || e.message.startsWith('messages/')) return e;
  return new PixiuError(e.code, `messages/${index}: ${e.message}`, { cause: e.cause });
}

/**
 * Replaces in `items` each item that `check` refuses for itself (a message over the size
 * limit, which ingest would otherwise find only as it stores it) by its error, placed
 * ({@link placedItemError}): it fails alone and counts no recipients. Run when the
 * node's budget refuses the batch ({@link BatchRecipients}); otherwise ingest finds them.
 * It stops as soon as the good items it has checked reach more than `fits` recipients:
 * the batch is then refused whole whatever the items after hold, and checking them
 * (encoding their data) would only cost the event loop the budget protects.
 * @param uncounted items not counted in the recipients ({@link crossKindRepeats})
 * @param fits the recipients the node's budget takes now ({@link InProgressBudget.free})
 * @returns the recipients the counted items left good reach: more than `fits` when it stopped
 */
export function refuseOwnFaults(
  items: (MessageBody | PixiuError)[], uncounted: ReadonlySet<number>, recipientsOf: (item: MessageBody) => number,
  check: (item: MessageBody) => void, fits: number,
): number {
  let kept = 0;
  for (let i = 0; i < items.length && kept <= fits; i++) {
    const c = items[i];
    if (c === undefined || c instanceof PixiuError) continue;
    const refused = ownFault(check, c, i);
    if (refused !== undefined) items[i] = refused;
    else if (!uncounted.has(i)) kept += recipientsOf(c);
  }
  return kept;
}

/** Item `index`'s refusal of its own, placed ({@link placedItemError}), or undefined when `check` passes it. */
function ownFault(check: (item: MessageBody) => void, item: MessageBody, index: number): PixiuError | undefined {
  try {
    check(item);
    return undefined;
  } catch (err) {
    if (!(err instanceof PixiuError)) throw err;
    return placedItemError(err, index);
  }
}

/** The refusal of batch item `index`: the batch reaches more than `max` recipients from item `from` on. */
function overLimit(index: number, max: number, from: number, advice: string): PixiuError {
  return new PixiuError('INVALID_REQUEST', `messages/${index}: the batch reaches more than ${max} recipients in all `
    + `from item ${from} on (each item's recipients, room members counted); ${advice}`);
}

/**
 * The recipients one batch reaches, against its limit and the node's {@link InProgressBudget}:
 * those counted before anything is sent ({@link limitRecipients}), and those of an item
 * left uncounted then ({@link crossKindRepeats}) that is admitted after all.
 */
export class BatchRecipients {
  readonly #budget: InProgressBudget;
  readonly #max: number;
  readonly #recipientsOf: (item: MessageBody) => number;
  readonly #check: ((item: MessageBody) => void) | undefined;
  #count: number;
  readonly #taken: (() => void)[] = [];

  /**
   * Takes the recipients `limited` counts from the node's budget.
   * @param limited the batch as {@link limitRecipients} answered it; when the budget
   *   refuses it, the items `check` refuses are replaced in `limited.items` by their errors
   * @param uncounted the items `limited` left uncounted ({@link crossKindRepeats})
   * @param check checks an item for a refusal of its own (a message over the size limit:
   *   413), run only when the budget refuses: those items fail alone and count nothing
   *   ({@link refuseOwnFaults}), and the rest is taken if it fits, so a batch of bad items
   *   gets their own errors whatever the load (DESIGN.md §7)
   * @throws PixiuError UNAVAILABLE when other batches hold too much of it
   */
  constructor(
    budget: InProgressBudget, max: number,
    limited: { items: (MessageBody | PixiuError)[]; recipients: number; recipientsOf: (item: MessageBody) => number },
    uncounted: ReadonlySet<number>, check?: (item: MessageBody) => void,
  ) {
    this.#budget = budget;
    this.#max = max;
    this.#recipientsOf = limited.recipientsOf;
    this.#check = check;
    this.#count = limited.recipients;
    try {
      this.#taken.push(budget.take(this.#count));
    } catch (err) {
      if (check === undefined) throw err;
      this.#count = refuseOwnFaults(limited.items, uncounted, limited.recipientsOf, check, budget.free);
      this.#taken.push(budget.take(this.#count));
    }
  }

  /**
   * Counts `item`, at `index` in the batch, admitted late: answers its refusal (over the
   * batch's limit; refused for itself, as the constructor's `check` says, when the node's
   * budget is full; else the budget's) or undefined when it is counted.
   */
  admitLate(index: number, item: MessageBody): PixiuError | undefined {
    const n = this.#recipientsOf(item);
    if (this.#count + n > this.#max) return overLimit(index, this.#max, index, 'send it in another batch');
    try {
      this.#taken.push(this.#budget.take(n));
    } catch (err) {
      return (this.#check === undefined ? undefined : ownFault(this.#check, item, index)) ?? (err as PixiuError);
    }
    this.#count += n;
    return undefined;
  }

  /** Gives back to the node's budget everything taken (call it once the batch is answered). */
  release(): void {
    for (const giveBack of this.#taken) giveBack();
  }
}
