/**
 * Producer routes for user messages (DESIGN.md §7): `POST /v1/messages`,
 * `POST /v1/messages/batch`, `GET /v1/messages/{id}`.
 */
// Adds the OpenAPI fields (summary, tags) to route schema types.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { PixiuError, RETRY_AFTER_SECONDS, invalid, outageFields } from '../../errors.js';
import { decodeMsgId, kindName } from '../../ids/msg-id.js';
import { LogThrottle, OUTAGE_LOG_INTERVAL_MS, thinnedFields } from '../../log-throttle.js';
import { isRedisFailure } from '../../redis/client.js';
import { checkData, MAX_READABLE_DEPTH, nestsDeeperThan } from '../../store/data-depth.js';
import { isUnreadable } from '../../store/unreadable.js';
import { distinctRecipients, type IngestResult, type RoomIngestResult, type RoomMessageInput, type StoredIds, type UserMessageInput } from '../../ingest/shapes.js';
import type { ApiDeps } from '../deps.js';
import { toHttpError } from '../error-handler.js';
import { conflictAnswer, documentedAs, errorResponses, messageTooLargeAnswer, noQuery, notFoundAnswer, tooLargeAnswer } from '../schemas.js';
import { bodyBytesOf, describeErrors, itemRefusal } from '../validation.js';
import { bodySchemaValidator } from '../route-validators.js';
import { batchBody, batchResult, documentedMessageBody, documentedMsgIdParam, ingestAnswer, messageBody, messageRecord } from './message-schemas.js';
import { BatchKeys, BatchRecipients, crossKindRepeats, isRoomMessage, limitRecipients, placedItemError, runsOfOneKind, type MessageBody } from './batch-items.js';
import { INGEST_BODIES_IN_PROGRESS, InProgressBudget, takeBatchBytes } from './ingest-budget.js';
import { RequestAbandoned } from '../../ingest/abandoned.js';
import { clientGoneOf, dropAbandoned } from '../abandoned-requests.js';
import { hasClientMsgId, withRetryAdvice } from '../retry-advice.js';
import { acceptedFields, debugOn, messageFields, noteStored, requestFields, type RequestFields } from '../request-log.js';

const validateItem = bodySchemaValidator(messageBody);

/**
 * Checks what the route's schema does not say: exactly one of `to` and `room` (the
 * document says it, {@link documentedMessageBody}), in words of its own.
 * @throws PixiuError INVALID_REQUEST
 */
function checkAddressing(body: { to?: unknown; room?: unknown }, where: string): void {
  if (body.room !== undefined && body.to !== undefined) throw invalid(`${where} has both to and room; give one`);
  if (body.room === undefined && body.to === undefined) {
    throw invalid(`${where} must have to (a user id or a list of them) or room`);
  }
}

/**
 * Validates batch item `i` as `POST /v1/messages` would; answers it, or its error, which
 * names the item (`messages/3/to …`). Its data's depth is checked here too, so that
 * error names the item like the others (ingest checks it again, unnamed).
 */
function checkItem(item: unknown, i: number): MessageBody | PixiuError {
  try {
    const refusal = itemRefusal(item);
    if (refusal !== undefined) throw invalid(`messages/${i}${refusal}`);
    if (!validateItem(item)) throw invalid(describeErrors(`messages/${i}`, validateItem.errors));
    checkAddressing(item as MessageBody, `messages/${i}`);
    checkData((item as MessageBody).data, `messages/${i}/data`);
    return item as MessageBody;
  } catch (err) {
    return toHttpError(err);
  }
}

/** Registers the message routes. */
export function messageRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { ingest, metrics } = deps;
  // The messages in progress on the node: their recipients and their bodies' bytes (ingest-budget.ts).
  const budget = new InProgressBudget(2 * deps.config.batchMaxRecipients, 'recipients', (n) => metrics.batchRecipientsInProgress.set(n));
  const bytes = new InProgressBudget(INGEST_BODIES_IN_PROGRESS * deps.config.maxBodyBytes, 'bytes of messages', (n) => metrics.ingestBytesInProgress.set(n));
  // A batch whose items an outage fails logs one warning, at most one per interval
  // across batches (a fresh operator saw 18,520 lines, one per item, in one outage).
  const batchOutages = new LogThrottle(OUTAGE_LOG_INTERVAL_MS);

  app.post<{ Body: MessageBody }>('/v1/messages', {
    // Its errors are counted by the error handler (app.ts), refused before this handler or in it.
    config: { ingestRoute: 'message', swaggerTransform: documentedAs({ body: documentedMessageBody }) },
    schema: {
      summary: 'Send a message to users, or to a room',
      operationId: 'sendMessage',
      description: 'Stores the message once and appends it to every recipient\'s inbox (with room: every member\'s). 201 when created; 200 with duplicate: true when the same client_msg_id was already completed.',
      tags: ['messages'],
      querystring: noQuery,
      body: messageBody,
      response: {
        200: ingestAnswer(true, 'A duplicate: the same client_msg_id was already completed; the same id and seqs, nothing appended twice'),
        201: ingestAnswer(false, 'Stored and appended to every recipient\'s inbox'),
        409: conflictAnswer,
        404: notFoundAnswer('a room message to a room with no members (a room exists while it has members); nothing stored'),
        413: messageTooLargeAnswer,
        ...errorResponses,
      },
    },
  }, async (req, reply) => {
    const started = performance.now();
    checkAddressing(req.body, 'body');
    const body = req.body;
    // Its recipients count in the node's budget as a batch's do (a room's members now),
    // up to what one batch may reach: a room larger than that (PIXIU_ROOM_SIZE_CAP may
    // be) would otherwise fit only beside nothing, and under steady traffic never.
    const roomSize = isRoomMessage(body) ? await ingest.roomSize(body.room) : undefined;
    const named = roomSize === undefined ? distinctRecipients(body as UserMessageInput) : undefined;
    const taken: (() => void)[] = [];
    // Its client may leave while it waits before the store: then nothing is stored (src/ingest/abandoned.ts).
    const gone = clientGoneOf(req);
    // Its MsgID once stored, for the line of a failure after that (request-log.ts).
    const storedIds: StoredIds = [];
    let result: IngestResult | RoomIngestResult;
    try {
      try {
        taken.push(bytes.take(bodyBytesOf(req), 'message'));
        taken.push(budget.take(Math.min(roomSize ?? named?.length ?? 0, deps.config.batchMaxRecipients), 'message'));
      } catch (err) {
        // Refused for the load: a message refused for itself (413) is told so first.
        ingest.check(body, named);
        throw err;
      }
      result = isRoomMessage(body)
        ? await ingest.sendToRoom(body, roomSize, gone, storedIds)
        : await ingest.sendToUsers(body as UserMessageInput, named, gone, storedIds);
    } catch (err) {
      if (!(err instanceof RequestAbandoned)) {
        noteStored(req, storedIds[0]);
        throw err;
      }
      metrics.countIngest('message', 'abandoned');
      return dropAbandoned(req, reply, 'message');
    } finally {
      for (const giveBack of taken) giveBack();
    }
    metrics.ingested('message', result.duplicate, started);
    // At debug only, its fields built only then: this is the hot path (bench/ingest.ts).
    if (debugOn(req.log)) req.log.debug(acceptedFields(body, result), 'message accepted');
    return reply.code(result.duplicate ? 200 : 201).send(result);
  });

  app.post<{ Body: { messages: unknown[] } }>('/v1/messages/batch', {
    config: {
      itemsFailAlone: true,
      swaggerTransform: documentedAs({
        body: { ...batchBody, properties: { messages: { ...batchBody.properties.messages, items: { ...documentedMessageBody, ...batchBody.properties.messages.items } } } },
      }),
    },
    schema: {
      summary: 'Send up to 1,000 messages',
      operationId: 'sendBatch',
      description: 'Each item is handled as POST /v1/messages would; an invalid item fails alone. At most PIXIU_BATCH_MAX_RECIPIENTS (100,000) recipients in all, room members counted: the item past it and all after it are 400. The whole body is held to PIXIU_MAX_BODY_BYTES (1 MiB by default; 413 over it, nothing stored): items near the message size limit fit about 15 to a batch. The answer has one result per item, in order: {status, id, recipients, duplicate} or {status, error}.',
      tags: ['messages'],
      querystring: noQuery,
      body: batchBody,
      // An item over the message size fails alone, in the 200 (its status 413).
      response: { 200: batchResult, 413: tooLargeAnswer(), ...errorResponses },
    },
  }, async (req, reply) => {
    const started = performance.now();
    // Outcome → messages, counted once per request rather than once per item.
    const outcomes = new Map<string, number>();
    const count = (outcome: string): void => {
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    };
    const taken: (() => void)[] = [];
    try {
      // Each item is checked alone; the valid ones go to ingest in runs of one kind,
      // one run after another (batch-items.ts `runsOfOneKind`), and ingest appends each
      // run in batch order: a user named twice gets them in that order.
      const items = req.body.messages.map((item, i) => checkItem(item, i));
      const repeats = crossKindRepeats(items);
      const max = deps.config.batchMaxRecipients;
      const limited = await limitRecipients(items, max, (room) => ingest.roomSize(room), repeats);
      const checked = limited.items;
      // Refused for the load, its items refused for themselves (over the size limit) fail alone first.
      const check = (item: MessageBody): void => ingest.check(item);
      taken.push(takeBatchBytes(bytes, bodyBytesOf(req), checked, repeats, limited.recipientsOf, check));
      const recipients = new BatchRecipients(budget, max, limited, repeats, check);
      taken.push(() => recipients.release());
      // Each item's outcome, by its index in the batch (none for an item refused before).
      const sent = new Map<number, PromiseSettledResult<IngestResult | RoomIngestResult>>();
      const keys = new BatchKeys();
      // One append flow for every run: appends that fail for want of Redis (the
      // connection dropped) fail those of the later runs too, so no later item reaches
      // a user ahead of an earlier one that its retry would then append after it; and
      // an ordered one, so neither does one already sent when Redis refused the earlier
      // one's append (Inbox.orderedFlow).
      const flow = deps.inbox.orderedFlow();
      const gone = clientGoneOf(req);
      // Each item's MsgID once stored, by its index in the batch, for its failure's line (request-log.ts).
      const storedIds: StoredIds = [];
      for (const run of runsOfOneKind(checked)) {
        const admitted = run.items.filter(({ item, index }) => {
          let refused = keys.admit(item, index);
          // Its key was freed by an earlier 4xx: counted now, as it was not before.
          if (refused === undefined && repeats.has(index)) refused = recipients.admitLate(index, item);
          if (refused === undefined) return true;
          const outcome = { status: 'rejected', reason: refused } as const;
          sent.set(index, outcome);
          keys.settled(index, outcome);
          return false;
        });
        const items = admitted.map((a) => a.item);
        const runIds: StoredIds = [];
        const outcomes: PromiseSettledResult<IngestResult | RoomIngestResult>[] = run.room
          ? await ingest.sendRoomBatch(items as RoomMessageInput[], flow, limited.sizes, gone, runIds)
          : await ingest.sendBatch(items as UserMessageInput[], flow, gone, runIds);
        outcomes.forEach((outcome, k) => {
          const index = (admitted[k] as { index: number }).index;
          storedIds[index] = runIds[k];
          sent.set(index, outcome);
          keys.settled(index, outcome);
        });
      }
      // The batch's items failed by an outage: logged as one line, the first one's reason.
      const unavailable: { first?: { e: PixiuError; item: number; fields: object }; items: number } = { items: 0 };
      // Items not stored because the client left (src/ingest/abandoned.ts): the batch is not answered.
      let abandoned = 0;
      // A line per item done, at debug only (the hot path: bench/ingest.ts).
      const debug = debugOn(req.log);
      // The request's own fields, for every item line that names it: made once, when first needed.
      let fields: RequestFields | undefined;
      const named = (): RequestFields => (fields ??= requestFields(req));
      const results = checked.map((c, i) => {
        const outcome = c instanceof PixiuError ? undefined : sent.get(i);
        if (outcome?.status === 'fulfilled') {
          const r = outcome.value;
          count(r.duplicate ? 'duplicate' : 'created');
          if (debug) req.log.debug({ item: i, ...acceptedFields(c, r) }, 'message accepted');
          return { status: r.duplicate ? 200 : 201, ...r };
        }
        if (outcome?.reason instanceof RequestAbandoned) {
          count('abandoned');
          abandoned += 1;
          return undefined;
        }
        const e = placedItemError(toHttpError(c instanceof PixiuError ? c : outcome?.reason), i);
        // As the error handler logs a whole request: an outage is a warning without a
        // stack (docs/api.md "Errors"), once per batch and thinned (below); anything else
        // at 5xx an error with its stack.
        if (e.code === 'UNAVAILABLE') {
          unavailable.first ??= { e, item: i, fields: messageFields(c, storedIds[i]) };
          unavailable.items += 1;
        }
        // Refused for the client's doing: at debug, as a whole request's `request rejected`
        // (error-handler.ts `logRejected`), a 409 naming the first message (walk29 F1).
        if (debug && e.status < 500) req.log.debug({ code: e.code, reason: e.message, ...named(), item: i, ...messageFields(c, storedIds[i]) }, 'batch item rejected');
        // The batch answers 200, so the error handler never sees these: counted here.
        if (isRedisFailure(e)) metrics.redisErrors.inc({ kind: 'request' });
        else if (e.status >= 500 && e.code !== 'UNAVAILABLE') {
          req.log.error({ err: e.cause ?? e, ...named(), item: i, ...messageFields(c, storedIds[i]) }, 'batch item failed');
        }
        count(e.code);
        // Logged and counted in Redis's words above; answered with what may have been done.
        return { status: e.status, ...withRetryAdvice(e, 'batch', hasClientMsgId(c)).toBody() };
      });
      if (abandoned > 0) return dropAbandoned(req, reply, 'batch', abandoned);
      const { first } = unavailable;
      // An item to retry, as a 503 would say: the answer is 200, but a client's retry
      // timing reads the header (RFC 9110 §10.2.3 allows it on any answer).
      if (first !== undefined) reply.header('retry-after', String(RETRY_AFTER_SECONDS));
      const left = first === undefined ? undefined : batchOutages.take();
      if (first !== undefined && left !== undefined) {
        // Named by the first such item's client_msg_id and stored message, as a message's 503 is (request-log.ts).
        req.log.warn({ ...outageFields(first.e), ...named(), item: first.item, ...first.fields, items: unavailable.items, ...thinnedFields(left) }, 'batch items unavailable');
      }
      // Every batch answered 200 is timed, whatever its items' outcomes; one refused whole is not.
      metrics.observeIngest('batch', started);
      return { results };
    } finally {
      for (const giveBack of taken) giveBack();
      for (const [outcome, n] of outcomes) metrics.countIngest('batch', outcome, n);
    }
  });

  app.get<{ Params: { id: string } }>('/v1/messages/:id', {
    // The document gives the id its pattern; the route checks it in decodeMsgId.
    config: { swaggerTransform: documentedAs({ params: { type: 'object', properties: { id: documentedMsgIdParam }, required: ['id'] } }) },
    schema: {
      summary: 'Read a stored message and where it was delivered',
      operationId: 'getMessage',
      tags: ['messages'],
      // No rule here but a string: decodeMsgId answers every malformed id alike, with
      // what is wrong with it ("not a message id: … (expected 16 lower-case hex digits)").
      params: { type: 'object', properties: { id: { type: 'string', description: 'a message id: 16 lower-case hex digits' } }, required: ['id'] },
      querystring: noQuery,
      response: { 200: messageRecord, 404: notFoundAnswer('no message with this id (never stored, or expired), or its stored record cannot be read'), ...errorResponses },
    },
  }, async (req) => {
    const { kind } = decodeMsgId(req.params.id);
    const record = await deps.store.get(req.params.id);
    // Its stored bytes cannot be decoded (src/store/unreadable.ts; logged once by the
    // store that holds it): unreadable like expired content, not a 500 (docs/api.md).
    if (isUnreadable(record)) throw new PixiuError('NOT_FOUND', `message ${record.id} cannot be read: its stored record cannot be decoded`);
    // One answer for a record never stored, swept, or expired but not yet swept — expired
    // by this node's clock too, as history here judges an inbox entry (entry-records.ts):
    // a record of another node whose clock is behind was 200 here while history gave it
    // as `expired` (walk31 F5).
    if (record === null || record.expiresAt <= Date.now()) throw new PixiuError('NOT_FOUND', `no message ${req.params.id} (never stored, or expired)`);
    if (nestsDeeperThan(record.data, MAX_READABLE_DEPTH)) {
      // Stored before ingest limited depth: unreadable like expired content, not a 500.
      req.log.error({ msgId: record.id }, 'stored message nests too deep to serialise');
      throw new PixiuError('NOT_FOUND', `message ${record.id} cannot be read: its data nests deeper than ${MAX_READABLE_DEPTH} levels`);
    }
    const users = record.to ?? [];
    const placed = await Promise.all(users.map((user) => deps.inbox.locate(user, record.id)));
    return {
      id: record.id,
      // From the id, which says it as the record does (the store mints ids by kind), so
      // that every answer has it, as the schema requires, even a record read off
      // another node's store.
      kind: kindName(kind),
      type: record.type,
      ...(record.from !== undefined ? { from: record.from } : {}),
      ...(record.room !== undefined ? { room: record.room } : {}),
      ts: record.ts,
      expires_at: record.expiresAt,
      ...(record.clientMsgId !== undefined ? { client_msg_id: record.clientMsgId } : {}),
      data: record.data,
      recipients: users.map((user, i) => {
        const p = placed[i];
        const seq = p?.seq ?? null;
        const ackedBy = seq === null || p === undefined ? [] : Object.keys(p.cursors).filter((d) => (p.cursors[d] ?? 0) >= seq).sort();
        return { user, seq, acked_by: ackedBy };
      }),
    };
  });
}
