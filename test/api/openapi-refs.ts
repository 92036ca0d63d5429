/**
 * Reading the served OpenAPI document through its `$ref`s (src/api/shared-schemas.ts
 * writes its repeated shapes once, in `components.schemas`), as a client generator
 * resolves them: local references only (`#/…`, a JSON Pointer, RFC 6901).
 */

/** What a JSON Pointer fragment (`#/a/b~1c`) names in `doc`; throws when nothing is there. */
export function resolveRef(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) throw new Error(`not a local reference: ${ref}`);
  let node = doc;
  for (const token of ref.slice(2).split('/').map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'))) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, token)) throw new Error(`${ref} does not resolve`);
    node = (node as Record<string, unknown>)[token];
  }
  return node;
}

/** Every `$ref` string in `doc`, in document order, with repeats. */
export function refsIn(doc: unknown): string[] {
  const refs: string[] = [];
  JSON.stringify(doc, (key, value: unknown) => {
    if (key === '$ref' && typeof value === 'string') refs.push(value);
    return value;
  });
  return refs;
}

/**
 * A copy of `doc` with every object holding a `$ref` replaced by what it refers to (itself
 * with its references replaced); a sibling of `$ref` would be lost, and the document
 * has none. Throws on a reference that does not resolve, or one that refers to itself
 * in turn.
 */
export function dereferenced<T>(doc: T): T {
  const copy = (node: unknown, seen: readonly string[]): unknown => {
    if (Array.isArray(node)) return node.map((item) => copy(item, seen));
    if (node === null || typeof node !== 'object') return node;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === 'string') {
      if (seen.includes(ref)) throw new Error(`${ref} refers to itself through ${seen.join(' → ')}`);
      return copy(resolveRef(doc, ref), [...seen, ref]);
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, copy(v, seen)]));
  };
  return copy(doc, []) as T;
}
