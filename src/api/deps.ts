/**
 * What the HTTP routes need from the rest of the service, passed in explicitly so a
 * route module depends on interfaces, not on how the service was assembled.
 */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.js';
import type { Inbox } from '../inbox/inbox.js';
import type { Ingest } from '../ingest/ingest.js';
import type { RecordReader } from '../store/record-reader.js';
import type { Metrics } from './metrics.js';

/** The service's parts, as the routes see them. */
export interface ApiDeps {
  readonly config: Config;
  /**
   * Message records by MsgID: this node's partitions from its store, the others from
   * the nodes owning them (src/cluster/store-router.ts, DESIGN.md §9).
   */
  readonly store: RecordReader;
  readonly inbox: Inbox;
  readonly ingest: Ingest;
  /**
   * Why this node's store takes no messages now, or those of some partitions, in the
   * words `/readyz` answers with (src/store/write-problem.ts: writes suspended, or a
   * partition reopening after a failed write, named); undefined when it takes them
   * all. Unset: never.
   */
  readonly writeProblem?: () => string | undefined;
  /**
   * True once the node is in its drain delay (`PIXIU_DRAIN_DELAY`, src/cli/serve.ts):
   * `/readyz` answers 503 and HTTP answers end their connection, all else is served as
   * before. Unset: never.
   */
  readonly draining?: () => boolean;
  /**
   * The clock the node-wide rates of the operations routes refill by (`/metrics`
   * scrapes, `/readyz` probes: src/api/node-rate.ts), ms, monotonic. Unset:
   * `performance.now`; a test's own, to spend a rate without racing its refill.
   */
  readonly opsClock?: () => number;
  /** The command connection, for readiness (PING). */
  readonly redis: Redis;
  readonly metrics: Metrics;
  /** The producer/admin bearer token. */
  readonly apiToken: string;
  /**
   * Registers more routes (the gateway) on the app; `producerScope` registers routes
   * behind the API token.
   */
  readonly extend?: (app: FastifyInstance, producerScope: ProducerScope) => Promise<void>;
}

/** Registers routes in a scope that requires the API token. */
export type ProducerScope = (routes: (scope: FastifyInstance) => void) => Promise<void>;
