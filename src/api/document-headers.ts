/**
 * The response headers of the OpenAPI document: whether each is always sent.
 *
 * A route's response schema declares its headers (`Retry-After`, `WWW-Authenticate`:
 * schemas.ts) with `required: true` where the server sends them with every such answer
 * (error-handler.ts `sendError`). @fastify/swagger copies each declaration whole into
 * the Header Object's `schema`, where JSON Schema reads `required` as a list of
 * properties, and leaves the Header Object's own `required` (OpenAPI 3.1 §4.8.21,
 * default false) unset: a generated client then typed the headers as optional, so its
 * user handled a missing `Retry-After` that never happens (a contract tester's F2).
 */

/** The parts of a Header Object this module reads and writes. */
interface HeaderObject {
  required?: boolean;
  schema?: { required?: unknown };
}

/**
 * A `transformObject` step for @fastify/swagger: in every response's `headers`, a
 * boolean `required` found in a header's schema is moved to the Header Object (kept
 * there only when true, OpenAPI's default being false).
 * @param doc the generated document (its `paths`, operations, `responses`)
 * @returns `doc`, changed in place
 */
export function withRequiredHeaders<T extends object>(doc: T): T {
  const paths = (doc as { paths?: Record<string, Record<string, { responses?: Record<string, { headers?: Record<string, HeaderObject> }> }>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      for (const response of Object.values(operation.responses ?? {})) {
        for (const header of Object.values(response.headers ?? {})) {
          const required = header.schema?.required;
          if (typeof required !== 'boolean') continue;
          delete header.schema?.required;
          if (required) header.required = true;
          else delete header.required;
        }
      }
    }
  }
  return doc;
}
