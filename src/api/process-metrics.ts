/**
 * prom-client's default metrics of the process (`collectDefaultMetrics`), with the six
 * whose reading costs the event loop in proportion to what the process holds read at
 * most once every {@link PROCESS_SAMPLE_MS} instead of at every scrape (secaudit F2:
 * `GET /metrics` needs no token, and with 8,000 sockets open a scrape held the loop
 * ~18 ms). Same names, help, labels and meaning; only how fresh they are differs
 * (docs/api.md, "GET /metrics"):
 * - `process_open_fds`: prom-client lists `/proc/self/fd` with `readdirSync` on the
 *   main thread; here `fs.promises.readdir` lists it on libuv's thread pool, and the
 *   scrape that finds the reading older than a second waits for a new one (concurrent
 *   scrapes share it). Linux only, as prom-client's.
 * - `nodejs_active_handles`, `nodejs_active_requests`, `nodejs_active_resources` and
 *   their `_total`: one list of every handle (each socket is one), request or resource,
 *   made on the main thread (no API gives the counts alone), at most once a second
 *   for both gauges of a pair.
 * A scrape's cost is thus the same with 10 sockets open or 10,000, bar one such reading
 * a second (docs/decisions.md, "Operations routes under load").
 */
import { readdir } from 'node:fs/promises';
import { Gauge, collectDefaultMetrics, type Registry } from 'prom-client';

/** How old a reading of the gauges above may be when scraped, ms. */
export const PROCESS_SAMPLE_MS = 1000;

/** How many of each kind, by the kind's name (a C++ class name, a resource type). */
type Counts = Readonly<Record<string, number>>;

/**
 * A reading taken again on the first ask once it is {@link PROCESS_SAMPLE_MS} old;
 * asks while a reading is taken share it. A failed reading keeps the last one (as
 * prom-client's collector ignores a failed read); it is tried again a sample later.
 */
class Sample<T> {
  readonly #read: () => Promise<T>;
  #value: T | undefined;
  #atMs = Number.NEGATIVE_INFINITY;
  #reading: Promise<void> | undefined;

  constructor(read: () => Promise<T>) {
    this.#read = read;
  }

  /** The reading, at most {@link PROCESS_SAMPLE_MS} old; undefined until one succeeded. */
  async get(): Promise<T | undefined> {
    if (performance.now() - this.#atMs >= PROCESS_SAMPLE_MS) {
      this.#reading ??= this.#refresh();
      await this.#reading;
    }
    return this.#value;
  }

  async #refresh(): Promise<void> {
    try {
      this.#value = await this.#read();
    } catch {
      // Kept: the last reading (see the class comment).
    } finally {
      this.#atMs = performance.now();
      this.#reading = undefined;
    }
  }
}

/** Counts of `list` by each element's constructor name (prom-client's `aggregateByObjectName`). */
function byConstructor(list: readonly unknown[]): Counts {
  const counts: Record<string, number> = {};
  for (const item of list) {
    const name = (item as { constructor?: { name?: string } } | null | undefined)?.constructor?.name;
    if (name !== undefined) counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

/** Counts of `names` by name. */
function byName(names: readonly string[]): Counts {
  const counts: Record<string, number> = {};
  for (const name of names) counts[name] = (counts[name] ?? 0) + 1;
  return counts;
}

/**
 * Registers a pair of gauges, `<name>{type}` and `<name>_total`, on one sampled list.
 * @param list makes the list and counts it; undefined when this Node has no such API
 */
function sampledPair(registry: Registry, name: string, help: string, totalHelp: string, list: (() => { counts: Counts; total: number }) | undefined): void {
  if (list === undefined) return;
  const sample = new Sample(async () => list());
  const byType: Gauge<'type'> = new Gauge({
    name, help, labelNames: ['type'] as const, registers: [registry],
    collect: async (): Promise<void> => {
      const read = await sample.get();
      byType.reset();
      for (const [type, count] of Object.entries(read?.counts ?? {})) byType.set({ type }, count);
    },
  });
  const total: Gauge = new Gauge({
    name: `${name}_total`, help: totalHelp, registers: [registry],
    collect: async (): Promise<void> => {
      const read = await sample.get();
      if (read !== undefined) total.set(read.total);
    },
  });
}

/** Node's unlisted APIs that prom-client reads (present in every supported Node, typed here). */
interface ActiveLists {
  _getActiveHandles?: () => unknown[];
  _getActiveRequests?: () => unknown[];
}

/**
 * Registers prom-client's default metrics on `registry` with `prefix`, the six above
 * replaced by sampled gauges of the same names.
 */
export function collectProcessMetrics(registry: Registry, prefix: string): void {
  collectDefaultMetrics({ register: registry, prefix });
  for (const name of ['process_open_fds', 'nodejs_active_handles', 'nodejs_active_handles_total', 'nodejs_active_requests',
    'nodejs_active_requests_total', 'nodejs_active_resources', 'nodejs_active_resources_total']) {
    registry.removeSingleMetric(`${prefix}${name}`);
  }
  if (process.platform === 'linux') {
    // Less the one the listing itself had open while it read the directory (as prom-client).
    const fds = new Sample(async () => (await readdir('/proc/self/fd')).length - 1);
    const openFds: Gauge = new Gauge({
      name: `${prefix}process_open_fds`, help: 'Number of open file descriptors.', registers: [registry],
      collect: async (): Promise<void> => {
        const count = await fds.get();
        if (count !== undefined) openFds.set(count);
      },
    });
  }
  const lists = process as unknown as ActiveLists;
  const counted = (get: (() => unknown[]) | undefined) => get === undefined ? undefined : () => {
    const list = get();
    return { counts: byConstructor(list), total: list.length };
  };
  sampledPair(registry, `${prefix}nodejs_active_handles`, 'Number of active libuv handles grouped by handle type. Every handle type is C++ class name.',
    'Total number of active handles.', counted(lists._getActiveHandles?.bind(process)));
  sampledPair(registry, `${prefix}nodejs_active_requests`, 'Number of active libuv requests grouped by request type. Every request type is C++ class name.',
    'Total number of active requests.', counted(lists._getActiveRequests?.bind(process)));
  sampledPair(registry, `${prefix}nodejs_active_resources`, 'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.',
    'Total number of active resources.', () => {
      const list = process.getActiveResourcesInfo();
      return { counts: byName(list), total: list.length };
    });
}
