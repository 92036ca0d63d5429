/**
 * What a process holds for each of `n` things it made between two heap snapshots of it
 * (`.heapsnapshot` files, V8's format: https://v8.dev/docs/heap-snapshot is not written
 * down, Chrome DevTools' reader is the reference): the objects in the second snapshot
 * whose node id the first did not have (V8 keeps ids across snapshots of one process),
 * grouped by what they are and what holds them, their self sizes summed and divided by
 * `n`. bench/lib/idle-memory.ts prints it for idle connections: which objects each one
 * costs (a Map's table, a closure and its context, a listener's wrapper), which the
 * heap-used figure alone does not tell.
 *
 * A group is `kind <- holder .edge`: the object's kind (`object:Name` by constructor,
 * `closure:file.js:line` for a function, `array:`, `string:`…), the kind of the first
 * object found holding it (preferring one that is new too) and the edge's name (a
 * property, `[i]` an element, `internal:table` a Map's hash table). For a closure's
 * context or an object a closure holds, the closure's own holder follows.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The parts of a `.heapsnapshot` read here. */
interface Snapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: string[];
      readonly node_types: [string[], ...unknown[]];
      readonly edge_fields: string[];
      readonly edge_types: [string[], ...unknown[]];
      readonly location_fields?: string[];
    };
  };
  readonly nodes: number[];
  readonly edges: number[];
  readonly strings: string[];
  readonly locations?: number[];
}

/** One group of new objects, per thing made: objects and bytes (self size). */
export interface HeapGroup {
  readonly group: string;
  readonly count: number;
  readonly bytes: number;
}

/** Node kinds whose name is their content (a string's text), not a kind: grouped without it. */
const CONTENT_NAMED = new Set(['string', 'concatenated string', 'sliced string', 'number']);

/** Reads a snapshot file (a few tens of MB of JSON for a server with thousands of connections). */
function read(file: string): Snapshot {
  return JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
}

/**
 * The groups of objects in `after` that are not in `before`, per one of `n` things
 * made in between, largest first, with their total.
 * @throws Error when a file is not a heap snapshot
 */
export function heapDiff(beforeFile: string, afterFile: string, n: number): { total: number; groups: HeapGroup[] } {
  const old = new Set<number>();
  {
    const before = read(beforeFile);
    const fields = before.snapshot.meta.node_fields;
    const idAt = fields.indexOf('id');
    for (let i = 0; i < before.nodes.length; i += fields.length) old.add(before.nodes[i + idAt] as number);
  }
  const s = read(afterFile);
  const meta = s.snapshot.meta;
  const NF = meta.node_fields.length;
  const EF = meta.edge_fields.length;
  const [TYPE, NAME, ID, SIZE, EDGES] = ['type', 'name', 'id', 'self_size', 'edge_count'].map((f) => meta.node_fields.indexOf(f)) as [number, number, number, number, number];
  const [E_TYPE, E_NAME, E_TO] = ['type', 'name_or_index', 'to_node'].map((f) => meta.edge_fields.indexOf(f)) as [number, number, number];
  const nodeTypes = meta.node_types[0];
  const edgeTypes = meta.edge_types[0];
  const { nodes, edges, strings } = s;
  const count = nodes.length / NF;
  const num = (i: number, field: number): number => nodes[i * NF + field] as number;
  const isNew = (i: number): boolean => !old.has(num(i, ID));

  // Each node's holder: the first strong edge to it, replaced by one from a new node.
  const holder = new Int32Array(count).fill(-1);
  const holderEdge: string[] = new Array<string>(count).fill('');
  const firstEdge = new Uint32Array(count + 1);
  for (let i = 0, e = 0; i < count; i++) {
    firstEdge[i] = e;
    e += num(i, EDGES) * EF;
  }
  firstEdge[count] = edges.length;
  for (let i = 0; i < count; i++) {
    for (let e = firstEdge[i] as number; e < (firstEdge[i + 1] as number); e += EF) {
      const type = edgeTypes[edges[e + E_TYPE] as number] ?? '';
      if (type === 'weak' || type === 'shortcut') continue;
      const to = (edges[e + E_TO] as number) / NF;
      const known = holder[to] as number;
      if (known !== -1 && (!isNew(i) || isNew(known))) continue;
      holder[to] = i;
      const name = type === 'element' || type === 'hidden' ? `[${edges[e + E_NAME]}]` : strings[edges[e + E_NAME] as number];
      holderEdge[to] = `${type}:${name}`;
    }
  }
  // Where each closure's code is: its shared function info's script, and the line.
  const where = new Map<number, string>();
  const scriptOf = (closure: number): string => {
    for (let e = firstEdge[closure] as number; e < (firstEdge[closure + 1] as number); e += EF) {
      if (strings[edges[e + E_NAME] as number] !== 'shared') continue;
      const shared = (edges[e + E_TO] as number) / NF;
      for (let f = firstEdge[shared] as number; f < (firstEdge[shared + 1] as number); f += EF) {
        if (strings[edges[f + E_NAME] as number] === 'script_or_debug_info') return path.basename(strings[num((edges[f + E_TO] as number) / NF, NAME)] ?? '');
      }
    }
    return '';
  };
  const lf = meta.location_fields ?? [];
  const locations = s.locations ?? [];
  for (let k = 0; k < locations.length; k += lf.length) {
    const closure = (locations[k + lf.indexOf('object_index')] as number) / NF;
    if (isNew(closure)) where.set(closure, `${scriptOf(closure)}:${(locations[k + lf.indexOf('line')] as number) + 1}`);
  }

  const kind = (i: number): string => {
    const type = nodeTypes[num(i, TYPE)] ?? '?';
    if (CONTENT_NAMED.has(type)) return `${type}:`;
    const name = strings[num(i, NAME)] ?? '';
    return `${type}:${type === 'closure' ? `${name}@${where.get(i) ?? ''}` : name.slice(0, 60)}`;
  };
  const heldBy = (i: number): string => {
    const h = holder[i] as number;
    return h === -1 ? '(no holder)' : `${kind(h)} .${holderEdge[i]}`;
  };
  const groups = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < count; i++) {
    if (!isNew(i)) continue;
    const h = holder[i] as number;
    let group = `${kind(i)}  <-  ${heldBy(i)}`;
    if (h !== -1 && (nodeTypes[num(h, TYPE)] === 'closure' || kind(h) === 'object:system / Context')) group += `  <-  ${heldBy(h)}`;
    const g = groups.get(group) ?? { count: 0, bytes: 0 };
    g.count += 1;
    g.bytes += num(i, SIZE);
    groups.set(group, g);
    total += num(i, SIZE);
  }
  const list = [...groups].map(([group, g]) => ({ group, count: g.count / n, bytes: g.bytes / n }));
  return { total: total / n, groups: list.sort((a, b) => b.bytes - a.bytes) };
}
