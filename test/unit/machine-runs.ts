/**
 * What the random runs of the delivery machine share (delivery-machine.property,
 * .marks.property and .random tests): the machine configurations they draw, the events
 * they draw alike, and the connections a run has open (at most four, each its own
 * device; a close the machine decided, 4008, carried out as the gateway does: a logout).
 */
import fc from 'fast-check';
import type { MachineConfig, ResumeRequest } from '../../src/delivery/machine.js';
import type { Driver } from './machine-driver.js';

/** Chooses among the connections open at that point of a run. */
export const pickArb = fc.nat(7);

/** A window of 1 – 5, pages of 1 – 6 entries, redelivery after 10 s then 2 s and 4 s. */
export const configArb: fc.Arbitrary<MachineConfig> = fc.record({
  window: fc.integer({ min: 1, max: 5 }),
  pageMax: fc.integer({ min: 1, max: 6 }),
  ackTimeoutMs: fc.constant(10_000),
  backoffMs: fc.constant([2_000, 4_000]),
  heartbeatMs: fc.constant(25_000),
});

/** The events both property tests draw (beyond their logins), as fc.oneof entries. */
export type CommonOp =
  | { op: 'logout'; pick: number }
  | { op: 'append'; n: number; notify: boolean }
  | { op: 'offer'; defer: boolean }
  | { op: 'heartbeat' }
  | { op: 'ack'; pick: number; how: 'all' | 'some' | 'wild'; x: number }
  | { op: 'pause' | 'drain' | 'due'; pick: number }
  | { op: 'answer' | 'fail' }
  | { op: 'expire'; x: number }
  | { op: 'trim'; x: number };

/** {@link CommonOp} entries with their weights; `flowWeight` for pause, drain and due. */
export function commonOpArbs(flowWeight: number): { arbitrary: fc.Arbitrary<CommonOp>; weight: number }[] {
  return [
    { arbitrary: fc.record({ op: fc.constant('logout' as const), pick: pickArb }), weight: 1 },
    { arbitrary: fc.record({ op: fc.constant('append' as const), n: fc.integer({ min: 1, max: 6 }), notify: fc.boolean() }), weight: 4 },
    { arbitrary: fc.record({ op: fc.constant('offer' as const), defer: fc.boolean() }), weight: 2 },
    { arbitrary: fc.record({ op: fc.constant('heartbeat' as const) }), weight: 1 },
    { arbitrary: fc.record({ op: fc.constant('ack' as const), pick: pickArb, how: fc.constantFrom('all' as const, 'some' as const, 'wild' as const), x: fc.nat(40) }), weight: 6 },
    { arbitrary: fc.record({ op: fc.constantFrom('pause' as const, 'drain' as const, 'due' as const), pick: pickArb }), weight: flowWeight },
    { arbitrary: fc.record({ op: fc.constantFrom('answer' as const, 'fail' as const) }), weight: 6 },
    { arbitrary: fc.record({ op: fc.constant('expire' as const), x: fc.nat(40) }), weight: 1 },
    { arbitrary: fc.record({ op: fc.constant('trim' as const), x: fc.nat(10) }), weight: 1 },
  ];
}

/** The connections open in one run of a {@link Driver}. */
export class OpenConns {
  readonly list: string[] = [];
  readonly #d: Driver;
  readonly #onClose: ((conn: string) => void) | undefined;
  #logins = 0;

  /** @param onClose told of each connection logged out or reaped */
  constructor(d: Driver, onClose?: (conn: string) => void) {
    this.#d = d;
    this.#onClose = onClose;
  }

  /** The open connection `i` picks (modulo how many are open); undefined when none is. */
  at(i: number): string | undefined {
    return this.list[i % Math.max(1, this.list.length)];
  }

  /** Logs a new connection in, its id also its device, unless four are open already. */
  login(resume: ResumeRequest): void {
    if (this.list.length >= 4) return;
    const conn = `c${++this.#logins}`;
    this.list.push(conn);
    this.#d.login(conn, resume, conn);
  }

  /** Logs out the connection `pick` chooses, if any. */
  logout(pick: number): void {
    const conn = this.at(pick);
    if (conn !== undefined) this.#close(conn);
  }

  /** Carries out the closes the machine decided (4008) as the gateway does: a logout. */
  reap(): void {
    for (const { conn } of this.#d.closes.splice(0)) if (this.list.includes(conn)) this.#close(conn);
  }

  #close(conn: string): void {
    this.list.splice(this.list.indexOf(conn), 1);
    this.#d.take(this.#d.m.logout(conn));
    this.#d.timers.delete(conn);
    this.#onClose?.(conn);
  }
}
