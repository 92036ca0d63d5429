/**
 * Input handling for the HTTP API around its schema validators (route-validators.ts):
 * JSON bodies only, parsed and refused with a truthful answer (not JSON, not UTF-8,
 * poisoned keys, too deep, lone surrogates), body framing on routes that take none,
 * and the words of schema errors (describeErrors).
 */
import { isUtf8 } from 'node:buffer';
import type { ErrorObject } from 'ajv';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { MAX_BODY_DEPTH, nestsDeeperThan } from './body-depth.js';
import { PixiuError, invalid } from '../errors.js';
import { misdirectedBatch, outsideBatchItems, unknownFieldOf, wordError } from './error-words.js';
import { continueIfExpected } from './expect-continue.js';
import { notJsonMessage, notJsonTypeMessage } from './json-error.js';
import { holdsLoneSurrogate, loneSurrogateFault } from './lone-surrogates.js';
import { isUpgrade } from './upgrade-request.js';

/** The length of each request's JSON body as read, bytes (set by the parser below). */
const bodySizes = new WeakMap<FastifyRequest, number>();

/**
 * The length in bytes of `req`'s JSON body as it arrived (what the node's byte budget
 * for messages in progress counts: src/api/routes/ingest-budget.ts); 0 for a request
 * whose body was not parsed as JSON.
 */
export function bodyBytesOf(req: FastifyRequest): number {
  return bodySizes.get(req) ?? 0;
}

/**
 * Makes fastify accept only JSON bodies (validated by route-validators.ts): fastify
 * also parses `text/plain` by default, which would turn a wrong content type into a
 * schema error (400) instead of 415.
 */
export function installBodyParsing(app: FastifyInstance): void {
  app.removeContentTypeParser('text/plain');
  // fastify's JSON parser (secure-json-parse) refuses `__proto__` and
  // `constructor.prototype` keys, which could poison prototypes once merged into an
  // object, but answers "not valid JSON" for them. Same parser, truthful answer.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    // The body has all been read: its refusal comes from the preValidation hook below,
    // and the connection stays open for the requests behind it (see RefusedBody).
    const refuse = (err: Error): void => done(null, new RefusedBody(err));
    const empty = (body as Buffer).length === 0;
    bodySizes.set(req, (body as Buffer).length);
    if (bodyIgnored(req, empty)) {
      done(null, undefined);
      return;
    }
    if (!takesBody(req)) {
      refuse(invalid(NO_BODY));
      return;
    }
    // fastify's parser would say "the JSON body is empty": an empty body is answered as
    // a missing one is (the preValidation hook below), in the same words.
    if (empty) {
      refuse(invalid(BODY_REQUIRED));
      return;
    }
    // JSON between systems is UTF-8 (RFC 8259 §8.1). Decoded anyway, bytes that are
    // not would become U+FFFD: another user id, another client_msg_id, silently.
    if (!isUtf8(body as Buffer)) {
      refuse(invalid('the body is not valid UTF-8 (JSON is UTF-8, RFC 8259 §8.1)'));
      return;
    }
    // Refused unparsed: JSON.parse takes seconds over a few million levels (body-depth.ts).
    if (nestsDeeperThan(body as Buffer)) {
      refuse(invalid(`the JSON body nests deeper than ${MAX_BODY_DEPTH} levels`));
      return;
    }
    const text = (body as Buffer).toString('utf8');
    // Content with a lone surrogate is refused (lone-surrogates.ts), walked for where
    // only when the text holds one.
    const checked = (value: unknown): void => {
      const refusal = holdsLoneSurrogate(text) ? refuseLoneSurrogates(value, req.routeOptions.config.itemsFailAlone === true) : undefined;
      if (refusal === undefined) done(null, value);
      else refuse(invalid(refusal));
    };
    parseJson(req, text, (err, value) => {
      if (err === null) {
        checked(value);
        return;
      }
      const plain = parsePlainJson(text);
      if (plain instanceof NotJson) {
        refuse(new PixiuError('INVALID_REQUEST', notJsonMessage(text, plain.cause), { cause: err }));
        return;
      }
      const isolated = req.routeOptions.config.itemsFailAlone === true ? isolatePoisonedItems(plain) : undefined;
      if (isolated !== undefined) checked(isolated);
      else refuse(invalid(POISONED_KEYS));
    });
  });
  // Any other content type (or none, with a body) is 415, unless the body is ignored
  // (bodyIgnored), or 400 on a route that takes no body. Decided from the headers: a
  // refused body is not read. Only a chunked body on a route that takes none is read,
  // as far as its first byte, since its headers cannot say it is empty.
  app.addContentTypeParser('*', (req, payload, done) => {
    const framing = bodyFraming(req);
    if (bodyIgnored(req, framing === 'empty')) {
      done(null, undefined);
      return;
    }
    if (takesBody(req)) {
      done(new PixiuError('UNSUPPORTED_MEDIA_TYPE', notJsonTypeMessage(req.headers['content-type'])), undefined);
      return;
    }
    if (framing === 'sized') {
      done(invalid(NO_BODY), undefined);
      return;
    }
    refuseUnlessEmpty(payload, (err) => done(err, undefined));
  });
  // fastify never parses a GET or HEAD body (RFC 9110 §9.3.1: it has no defined
  // meaning), so none of the above sees one; it is refused as on any route that takes
  // no body, rather than silently ignored. (An upgrade request with a body, the
  // WebSocket handshake included, is refused by the gateway's upgrade guard.)
  app.addHook('onRequest', (req, reply, done) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || req.is404 || isUpgrade(req)) {
      done();
      return;
    }
    const framing = bodyFraming(req);
    if (framing === 'chunked') {
      // Read before the preParsing hook would send a 100 the client may be waiting for.
      continueIfExpected(req, reply);
      refuseUnlessEmpty(req.raw, (err) => done(err ?? undefined));
    } else done(framing === 'empty' ? undefined : invalid(NO_BODY));
  });
  // A body the JSON parser refused (RefusedBody), and a route that takes a body and got
  // none (no Content-Type, no body: fastify parses nothing and the schema would say
  // "body must be object").
  app.addHook('preValidation', (req, _reply, done) => {
    if (req.body instanceof RefusedBody) done(req.body.err);
    else if (req.body === undefined && takesBody(req) && !req.is404) done(invalid(BODY_REQUIRED));
    else done();
  });
}

/**
 * What a request's headers say of its body: `empty` (`Content-Length: 0`, or no length
 * and no `Transfer-Encoding`), `sized` (a length above 0), or `chunked` (no length: only
 * reading it tells whether it is empty, see {@link refuseUnlessEmpty}).
 */
export function bodyFraming(req: FastifyRequest): 'empty' | 'sized' | 'chunked' {
  const length = req.headers['content-length'];
  if (length !== undefined) return Number(length) === 0 ? 'empty' : 'sized';
  return req.headers['transfer-encoding'] !== undefined ? 'chunked' : 'empty';
}

/**
 * Reads a chunked body as far as its first byte: calls `done` with a NO_BODY error as
 * soon as one arrives, with null when the body ends empty, or with the stream's error.
 */
function refuseUnlessEmpty(body: NodeJS.ReadableStream, done: (err: Error | null) => void): void {
  let answered = false;
  const answer = (err: Error | null): void => {
    if (answered) return;
    answered = true;
    body.removeAllListeners('data');
    done(err);
  };
  body.on('data', (chunk: Buffer) => {
    if (chunk.length > 0) answer(invalid(NO_BODY));
  });
  body.once('end', () => answer(null));
  body.once('error', (err: Error) => answer(err));
}

/**
 * A JSON body read whole and refused (not JSON, not UTF-8, poisoned keys, empty, or on a
 * route that takes none), handed on as the body and thrown by the preValidation hook.
 * Thrown by the parser itself, it would make fastify end the connection ("the client may
 * send more data", content-type-parser.js), and a request pipelined behind it on a
 * keep-alive connection would go unanswered, though nothing of this one is left unread.
 */
class RefusedBody {
  constructor(readonly err: Error) {}
}

/** What a route that takes a JSON body answers when it gets none, or an empty one. */
export const BODY_REQUIRED = 'a JSON body is required';

/**
 * What a route that takes no body (`DELETE …/connections`) answers when it gets one:
 * ignoring it would silently ignore whatever the client meant by it (docs/api.md,
 * "Input rules"). An empty one, of any content type, is accepted.
 */
export const NO_BODY = 'this route takes no body';

/** True when the request's Content-Type is `application/json` (any parameters, any case). */
export function declaresJson(req: FastifyRequest): boolean {
  return req.headers['content-type']?.split(';')[0]?.trim().toLowerCase() === 'application/json';
}

/** True when the request's route declares a body schema (a route that takes a JSON body). */
export function takesBody(req: FastifyRequest): boolean {
  return req.routeOptions.schema?.body !== undefined;
}

/**
 * True when a request's body is not parsed, whatever its content type: no route matches
 * it (404 whatever the body; fastify parses the body before its not-found handler runs,
 * so a bad or empty one would be a 400), or it is empty and its route takes none
 * (`DELETE …/connections` from HTTP clients that always send a Content-Type).
 */
function bodyIgnored(req: FastifyRequest, empty: boolean): boolean {
  return req.is404 || (empty && !takesBody(req));
}

/** What JSON.parse threw for a text that is not JSON. */
class NotJson {
  constructor(readonly cause: unknown) {}
}

/**
 * `text` parsed by JSON.parse (own properties only: nothing merged, no prototype set),
 * or {@link NotJson} with the parser's error (only asked after the guarded parser
 * refused it: its own error says nothing of why).
 */
function parsePlainJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    return new NotJson(err);
  }
}

/** The error of a body, or of a batch item, holding a key that could poison a prototype. */
export const POISONED_KEYS = 'keys named __proto__ or constructor.prototype are not accepted';

/**
 * A route's `config` as the JSON parser reads it (typed the way fastify documents).
 * `itemsFailAlone`: the body is `{messages: [...]}` whose items fail alone
 * (`POST /v1/messages/batch`), so an item holding a `__proto__` or
 * `constructor.prototype` key, or whose `data` holds a lone surrogate, is replaced by a
 * placeholder ({@link itemRefusal})
 * instead of failing the whole body.
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    itemsFailAlone?: boolean;
  }
}

/** The placeholders of refused batch items, each with its refusal after `messages/<i>`. */
const refusedItems = new WeakMap<object, string>();

/** A placeholder for a batch item refused by the body parser, which then fails alone. */
function refusedItem(refusal: string): object {
  const placeholder = {};
  refusedItems.set(placeholder, refusal);
  return placeholder;
}

/**
 * When `item` is the placeholder of a batch item the body parser refused, its refusal,
 * to follow `messages/<i>`: `: keys named __proto__ …` ({@link POISONED_KEYS}) or
 * `/data/k holds a lone surrogate …` (lone-surrogates.ts); else undefined.
 */
export function itemRefusal(item: unknown): string | undefined {
  return typeof item === 'object' && item !== null ? refusedItems.get(item) : undefined;
}

/**
 * Where a parsed body's content (`data`, or with `itemsFailAlone` each item's `data`)
 * holds a lone surrogate: the body's refusal (`data/k holds a lone surrogate …`), or
 * undefined, the batch items holding one replaced by placeholders ({@link itemRefusal}).
 * Fields other than `data` are left to their schemas, which refuse lone surrogates.
 */
function refuseLoneSurrogates(body: unknown, itemsFailAlone: boolean): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const record = body as { data?: unknown; messages?: unknown };
  if (itemsFailAlone && Array.isArray(record.messages)) {
    const items = record.messages;
    items.forEach((item, i) => {
      const fault = typeof item === 'object' && item !== null ? loneSurrogateFault((item as { data?: unknown }).data) : undefined;
      if (fault !== undefined) items[i] = refusedItem(`/data${fault}`);
    });
    return undefined;
  }
  const fault = loneSurrogateFault(record.data);
  return fault === undefined ? undefined : `data${fault}`;
}

/** True when `value` holds no `__proto__` key and no `constructor` key holding `prototype` (secure-json-parse's scan). */
function holdsNoPoison(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true;
  try {
    secureJson.scan(value, { protoAction: 'error', constructorAction: 'error' });
    return true;
  } catch {
    return false;
  }
}

/**
 * `{messages: [...]}` (parsed with JSON.parse) with each item that holds a poisoned key
 * replaced by a placeholder, or undefined when a poisoned key is outside the items.
 */
function isolatePoisonedItems(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || !Array.isArray((body as { messages?: unknown }).messages)) return undefined;
  const record = body as { messages: unknown[] };
  const items = record.messages;
  record.messages = [];
  if (!holdsNoPoison(record)) return undefined;
  record.messages = items.map((item) => (holdsNoPoison(item) ? item : refusedItem(`: ${POISONED_KEYS}`)));
  return record;
}

/**
 * Formats the first Ajv error like `body/messages/3/type must be 1–64 characters, …`:
 * the field's path and the rule in plain words (error-words.ts), naming the offending
 * field for unknown ones (fastify's default does not), and the rule of a `pattern` in
 * words (src/api/pattern-rules.ts), never the pattern. An object that misses a
 * required field and has an unknown one is told of the unknown one first, since it is
 * likely the missing one misspelt (`{"msgs": []}`).
 */
export function describeErrors(prefix: string, errors: readonly ErrorObject[] | null | undefined): string {
  const e = errors?.[0];
  if (!e) return `${prefix} is invalid`;
  const path = `${prefix}${e.instancePath}`;
  const unknown = e.keyword === 'required' ? unknownFieldOf(e) : undefined;
  if (unknown !== undefined) {
    return `${path} has an unknown field ${JSON.stringify(unknown)} (and ${wordError(e)})${misdirectedBatch(path, e, unknown)}${outsideBatchItems(path, e, unknown)}`;
  }
  const stray = e.keyword === 'additionalProperties' ? String((e.params as { additionalProperty?: unknown }).additionalProperty) : undefined;
  return `${path} ${wordError(e)}${stray !== undefined ? outsideBatchItems(path, e, stray) : ''}`;
}
