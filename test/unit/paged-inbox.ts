/**
 * A stand-in inbox for session and hub tests of epoch rotations (session-rotation-retry,
 * hub-owed-rotation): `range` reads a page the test sets, `rotateEpoch` answers as the
 * test says (throw for a failed call: Redis down). Ids, records and entries to build
 * pages with, and a wait for the sessions' awaited calls.
 */
import type { Inbox, InboxEntry, InboxPage } from '../../src/inbox/inbox.js';
import type { RecordReader } from '../../src/store/record-reader.js';
import type { StoredMessage } from '../../src/store/record.js';

/** MsgID `n` (16 hex digits). */
export const id = (n: number): string => n.toString(16).padStart(16, '0');
/** A stored message of MsgID `n`. */
export const record = (n: number): StoredMessage => ({ id: id(n), kind: 1, type: 't', data: { n }, ts: 1, expiresAt: Number.MAX_SAFE_INTEGER });
/** Inbox entry `seq` naming MsgID `n` (the seq's own by default). */
export const entry = (seq: number, n = seq): InboxEntry => ({ seq, id: id(n), kind: 1 });
/** Reads every record by its id ({@link record}). */
export const records: RecordReader = { isOpen: true, get: async () => null, getMany: async (ids: readonly string[]) => ids.map((i) => record(Number.parseInt(i, 16))) };

/** Lets the sessions' awaited calls and their continuations run. */
export async function settled(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** The stand-in inbox. */
export class PagedInbox {
  /** What `range` reads (its entries after the seq asked, up to the limit). */
  page: InboxPage;
  /** `range` calls so far. */
  reads = 0;
  /** The epoch each `rotateEpoch` call was asked to replace, in order. */
  readonly rotations: string[] = [];
  /** The inbox to give the session or hub. */
  readonly inbox: Inbox;

  /** @param rotate answers a `rotateEpoch` call (after it is recorded): the epoch after, or throws */
  constructor(page: InboxPage, rotate: (self: PagedInbox, epoch: string) => Promise<string>) {
    this.page = page;
    this.inbox = {
      range: async (_u: string, after: number, limit: number): Promise<InboxPage> => {
        this.reads++;
        return { ...this.page, entries: this.page.entries.filter((e) => e.seq > after).slice(0, limit) };
      },
      // No lineage known: a reset's trimmed gap goes out unmarked (src/inbox/lineage.ts).
      lineage: async (): Promise<undefined> => undefined,
      rotateEpoch: async (_u: string, epoch: string): Promise<string> => {
        this.rotations.push(epoch);
        return rotate(this, epoch);
      },
    } as unknown as Inbox;
  }
}
