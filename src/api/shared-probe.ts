/**
 * How `GET /readyz` probes Redis (src/api/routes/health.ts) with its writes bounded
 * whatever the request rate: the route needs no token, and each probe is a `PSETEX`
 * written to the AOF and to replicas (secaudit F6: one anonymous client made 5–14 k a
 * second, ~1 MB/s of AOF). docs/decisions.md, "Operations routes under load".
 */
import type { Redis } from 'ioredis';
import { writeReadinessProbe } from '../redis/readiness-probe.js';
import { NodeRate } from './node-rate.js';
import type { RateLimit } from '../gateway/user-rate.js';

/**
 * The node's probes of Redis: a burst of 10, then 2 a second. Load balancers and
 * kubelets poll every few seconds, so each of their calls sends its own probe; past
 * this rate a call is answered from the last probe, which started less than 0.5 s
 * before (docs/api.md, "Operations").
 */
export const PROBE_LIMIT: RateLimit = Object.freeze({ burst: 10, perMinute: 120 });

/** A probe sent, and the connection it went out on. */
interface Probe {
  readonly done: Promise<void>;
  /** `redis.stream` when it was sent: a reconnect makes a new one. */
  readonly stream: unknown;
  /** True until {@link done} settles. */
  inFlight: boolean;
}

/**
 * {@link writeReadinessProbe} for every `/readyz` of a node, with its Redis writes
 * bounded whatever the request rate:
 * - calls while a probe is in flight share it (its answer, or its error);
 * - otherwise a call sends its own probe while {@link PROBE_LIMIT} allows; past it, it
 *   gets the last probe's outcome again, from a probe that started less than
 *   1 / rate before (0.5 s);
 * - except when the connection that probe went out on is no longer the ready one
 *   (closed: Redis stopped, restarted, the network dropped): then a call always probes
 *   anew, which fails at once while there is no connection (no offline queue,
 *   src/redis/client.ts) and sends nothing to Redis. So a Redis that goes away is seen
 *   at once; one that still answers but starts refusing writes, within 0.5 s under a
 *   flood of calls, at once otherwise.
 */
export class SharedReadinessProbe {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #rate: NodeRate;
  #last: Probe | undefined;

  /**
   * @param redis the node's command connection
   * @param key the probe's key (`Keys.readinessProbe`)
   * @param limit the probes' rate ({@link PROBE_LIMIT}; a test's own)
   * @param now the clock the rate refills by, ms (default `performance.now`; a test's own)
   */
  constructor(redis: Redis, key: string, limit: RateLimit = PROBE_LIMIT, now?: () => number) {
    this.#redis = redis;
    this.#key = key;
    this.#rate = new NodeRate(limit, now);
  }

  /**
   * Resolves when Redis took the probe's write (this call's, or a shared or recent one).
   * @throws what {@link writeReadinessProbe} throws
   */
  check(): Promise<void> {
    const last = this.#last;
    const reusable = last !== undefined && this.#redis.status === 'ready' && last.stream === this.#redis.stream;
    if (reusable && last.inFlight) return last.done;
    // Every probe sent takes a token if one is left. One on a new connection goes without:
    // it fails at once while there is no connection, and there is one such per reconnect.
    if (this.#rate.take() > 0 && reusable) return last.done;
    const probe: Probe = { done: writeReadinessProbe(this.#redis, this.#key), stream: this.#redis.stream, inFlight: true };
    const settled = (): void => {
      probe.inFlight = false;
    };
    probe.done.then(settled, settled);
    this.#last = probe;
    return probe.done;
  }
}
