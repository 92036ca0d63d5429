/**
 * The shapes the OpenAPI document publishes once, in `components.schemas`, and refers
 * to with `$ref` wherever they appear.
 *
 * @fastify/swagger copies a route's schemas whole into the document, so the error body
 * of DESIGN.md §7 was written out on every error answer of every route (85 copies, most
 * of the ~148 KB document), the message id on every answer holding one, and a client
 * generator (openapi-generator, openapi-typescript) made one type per copy:
 * `SendMessage400Response`, `SendMessage401Response`, … for one error body (walk12 F2).
 *
 * Only the document is rewritten: each route keeps its own schemas, which its validator
 * and serializer compile as before (docs/decisions.md, "The OpenAPI document's shared
 * components"). A shape is replaced by its `$ref` only where it appears exactly as
 * published here (deep-equal, descriptions included; only a response schema's copy of
 * its response's own description is set aside, and a parameter's description, moved out
 * of its schema, is put back to compare), so a schema that merely looks
 * alike (another description, another pattern) stays inline, and the names are this
 * module's, not guessed: the same document comes out of every run.
 */
import { stringify } from 'safe-stable-stringify';
import { documentedMessageBody, ingestResult } from './routes/message-schemas.js';
import { historyPage } from './routes/history.js';
import { withPortablePatterns } from './portable-patterns.js';
import { errorBody, msgId, userId } from './schemas.js';

/** Where the document's shared schemas are, as a `$ref` names them. */
const COMPONENTS_PREFIX = '#/components/schemas/';

/**
 * The shared shapes by component name, as the routes declare them (their patterns
 * published by portable-patterns.ts). A shape inside another is referred to there too:
 * `ErrorBody` holds a `$ref` to `ErrorDetail`, which holds one to `ErrorCode`.
 */
export const SHARED_SCHEMAS: ReadonlyArray<readonly [name: string, schema: object]> = [
  // The error answer {"error": {"code", "message"}}; its inner object is also a batch
  // item's `error`, and the code is the catalogue's enum (src/errors.ts).
  ['ErrorBody', errorBody],
  ['ErrorDetail', errorBody.properties.error],
  ['ErrorCode', errorBody.properties.error.properties.code],
  ['MessageId', msgId],
  ['UserId', userId],
  // The two forms of a message, as POST /v1/messages and each batch item take it,
  // named by their own titles.
  ...documentedMessageBody.oneOf.map((form) => [form.title, form] as const),
  // One recipient of a message sent to users: {user, seq}.
  ['Recipient', ingestResult.properties.recipients.items],
  ['HistoryPage', historyPage],
];

/** A JSON object of the document. */
type Node = Record<string, unknown>;

function isObject(value: unknown): value is Node {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Replaces, inside `node` (not `node` itself), every object that is one of `byForm`'s
 * keys (canonical JSON, see {@link stringify}) with a `$ref` to its name. An object
 * replaced is not looked into: its own shared shapes are referred to from its component.
 * An array's items are walked as an object's values (`Object.entries` gives its indexes).
 */
function refer(node: unknown, byForm: ReadonlyMap<string, string>): void {
  if (node === null || typeof node !== 'object') return;
  const holder = node as Node;
  for (const [key, value] of Object.entries(holder)) {
    const name = isObject(value) ? byForm.get(stringify(value) ?? '') : undefined;
    if (name !== undefined) holder[key] = { $ref: COMPONENTS_PREFIX + name };
    else refer(value, byForm);
  }
}

/**
 * A Parameter, Media Type or Header Object of the document, whose `schema` a shared
 * shape may replace; for a response's media type, also the response's description.
 */
interface Holder {
  holder: Node;
  /**
   * The description of the response the schema answers, which @fastify/swagger leaves
   * in the schema as well: a schema that is a shared shape but for these words (the
   * error body, described by each status) is that shape, the words staying in the
   * Response Object.
   */
  responseWords?: unknown;
  /**
   * A parameter's description, which @fastify/swagger moves out of its schema into the
   * Parameter Object: a schema without one that, with these words, is a shared shape
   * (`{uid}`: UserId) is that shape, the words staying in the Parameter Object too.
   */
  parameterWords?: unknown;
}

/** The holders of the operations' schemas, in document order. */
function schemaHolders(doc: Node): Holder[] {
  const holders: Holder[] = [];
  const media = (content: unknown, responseWords?: unknown): void => {
    if (!isObject(content)) return;
    for (const m of Object.values(content)) if (isObject(m)) holders.push({ holder: m, responseWords });
  };
  for (const operations of Object.values(isObject(doc.paths) ? doc.paths : {})) {
    for (const op of Object.values(isObject(operations) ? operations : {})) {
      if (!isObject(op)) continue;
      if (Array.isArray(op.parameters)) holders.push(...op.parameters.filter(isObject).map((holder) => ({ holder, parameterWords: holder.description })));
      if (isObject(op.requestBody)) media(op.requestBody.content);
      for (const response of Object.values(isObject(op.responses) ? op.responses : {})) {
        if (!isObject(response)) continue;
        media(response.content, response.description);
        if (isObject(response.headers)) holders.push(...Object.values(response.headers).filter(isObject).map((holder) => ({ holder })));
      }
    }
  }
  return holders;
}

/**
 * The shared shape `schema` is, by name: itself; under a response, itself but for a
 * `description` that repeats the response's ({@link Holder.responseWords}); as a
 * parameter's, itself with the description moved to the parameter
 * ({@link Holder.parameterWords}).
 */
function sharedNameOf(schema: Node, byForm: ReadonlyMap<string, string>, { responseWords, parameterWords }: Omit<Holder, 'holder'>): string | undefined {
  const name = byForm.get(stringify(schema) ?? '');
  if (name !== undefined) return name;
  if (parameterWords !== undefined && schema.description === undefined) {
    return byForm.get(stringify({ ...schema, description: parameterWords }) ?? '');
  }
  if (responseWords === undefined || schema.description !== responseWords) return undefined;
  const { description: _repeated, ...shape } = schema;
  return byForm.get(stringify(shape) ?? '');
}

/**
 * A `transformObject` step for @fastify/swagger: every copy of a {@link SHARED_SCHEMAS}
 * shape in the operations' schemas becomes a `$ref` to `components.schemas`, where the
 * shape is written once (with its own shared shapes referred to in turn). A response's
 * schema that is a shared shape but for a `description` repeating the response's is
 * that shape (the Response Object keeps the words); so is a parameter's schema whose
 * description @fastify/swagger moved to the Parameter Object, when those words are the shape's. Run after the steps that rewrite what a schema holds (patterns:
 * portable-patterns.ts): the shapes are compared in their published form.
 * @param doc the generated document (OpenAPI 3.1), changed in place
 * @param shared the shapes to publish once, by name (names unique, shapes distinct)
 * @returns `doc`
 * @throws Error when two shared shapes are the same, or a name is taken by another
 *   schema in `components.schemas`
 */
export function withSharedSchemas<T extends object>(doc: T, shared: ReadonlyArray<readonly [string, object]> = SHARED_SCHEMAS): T {
  const published = shared.map(([name, schema]) => [name, withPortablePatterns(structuredClone(schema)) as Node] as const);
  const byForm = new Map<string, string>();
  for (const [name, schema] of published) {
    const form = stringify(schema) ?? '';
    const other = byForm.get(form);
    if (other !== undefined) throw new Error(`shared schemas ${other} and ${name} are the same shape`);
    byForm.set(form, name);
  }
  const root = doc as Node;
  for (const { holder, ...words } of schemaHolders(root)) {
    const name = isObject(holder.schema) ? sharedNameOf(holder.schema, byForm, words) : undefined;
    if (name !== undefined) holder.schema = { $ref: COMPONENTS_PREFIX + name };
    else refer(holder.schema, byForm);
  }
  const components = (root.components ??= {}) as Node;
  const schemas = (components.schemas ??= {}) as Node;
  for (const [name, schema] of published) {
    if (schemas[name] !== undefined) throw new Error(`components.schemas already has ${name}`);
    refer(schema, byForm);
    schemas[name] = schema;
  }
  return doc;
}
