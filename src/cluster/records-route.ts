/**
 * `POST /internal/v1/records` (DESIGN.md §9): how other nodes read the records of this
 * node's store partitions (store-router.ts is the caller).
 *
 * - Auth: `Authorization: Bearer <cluster secret>` (cluster-secret.ts), checked in
 *   constant time before the body is read; nodes with different API tokens trust each
 *   other through it. Missing or wrong: 401 UNAUTHORIZED.
 * - Body: `{ids: [MsgID, …]}`, 0 to {@link MAX_RECORD_IDS} ids, each of a partition
 *   this node's store holds; anything else is 400 INVALID_REQUEST (an id of another
 *   partition too: the caller's view of the owners is stale, and answering null for
 *   it would turn a message into a gap).
 * - Answer: `{store, records}`: this store's id, and per id in order the stored record
 *   (`{id, kind, type, from?, data, to?, room?, ts, clientMsgId?, expiresAt}`), null
 *   when it is missing or expired, or `{id, unreadable: true}` when its stored bytes
 *   cannot be decoded (src/store/unreadable.ts: the reader shows the same
 *   `undeliverable` gap as this node). 503 UNAVAILABLE when the store fails. A node of
 *   an earlier release never sends the mark (it answered 500 for such a record), and
 *   one reading this answer takes the mark for a bad answer (UNAVAILABLE, retried): a
 *   mixed cluster reads records as before, that one record stays a stall there.
 *
 * Hidden from the OpenAPI document: it is for nodes, not producers (docs/api.md).
 */
// Adds the OpenAPI fields (hide) to route schema types.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { PixiuError, invalid } from '../errors.js';
import { tryDecodeMsgId } from '../ids/msg-id.js';
import { errorBody, msgId } from '../api/schemas.js';
import type { MessageStore, ReadRecord } from '../store/message-store.js';
import type { ClusterSecret } from './cluster-secret.js';
import { partitionSpan } from './partition-claims.js';

/** Path of the route. */
export const RECORDS_PATH = '/internal/v1/records';
/** Most ids in one request. */
export const MAX_RECORD_IDS = 1000;

/** What the route answers. */
export interface RecordsAnswer {
  /** The answering store's id: a caller checks it is the one it meant to ask. */
  readonly store: string;
  /** Per id asked, in order: the record, null when missing or expired, or the unreadable mark (`{id, unreadable: true}`). */
  readonly records: readonly (ReadRecord | null)[];
}

/** The request body's schema. */
export const recordsBody = {
  type: 'object',
  additionalProperties: false,
  required: ['ids'],
  properties: {
    // None: the answer only names the store (a node checking its advertised URL, advertise-check.ts).
    ids: { type: 'array', minItems: 0, maxItems: MAX_RECORD_IDS, items: msgId },
  },
} as const;

/** What the route needs. */
export interface RecordsRouteDeps {
  /** This node's own store. */
  readonly store: MessageStore;
  /** Its id (src/cluster/store-ownership.ts). */
  readonly storeId: string;
  readonly secret: ClusterSecret;
}

/** Registers the route in its own scope, with its own auth. */
export async function recordsRoute(app: FastifyInstance, deps: RecordsRouteDeps): Promise<void> {
  const { store, storeId, secret } = deps;
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (req) => {
      if (!(await secret.verify(req.headers.authorization))) {
        throw new PixiuError('UNAUTHORIZED', 'missing or invalid cluster secret (Authorization: Bearer <secret>)');
      }
    });
    scope.post<{ Body: { ids: string[] } }>(RECORDS_PATH, {
      schema: { hide: true, body: recordsBody, response: { '4xx': errorBody, '5xx': errorBody } },
    }, async (req): Promise<RecordsAnswer> => {
      const { ids } = req.body;
      for (const id of ids) {
        const parts = tryDecodeMsgId(id);
        if (parts === undefined) throw invalid(`not a message id: ${JSON.stringify(id)}`);
        if (!store.hasPartition(parts.partition)) {
          throw invalid(`message id ${id} is not of this store's partitions ${partitionSpan(store.partitionBase, store.partitions)}`);
        }
      }
      return { store: storeId, records: await store.getMany(ids) };
    });
  });
}
