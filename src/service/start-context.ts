/**
 * What the steps of a service's start share (service.ts `startService`, which runs them
 * in the order a message flows through the parts, DESIGN.md §1): the settings, the log,
 * the shutdown built up as parts start, and the check of a stop asked for meanwhile.
 */
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import type { CloseStep } from './shutdown-steps.js';
import type { StartStallWait } from './start-stall.js';

/** The start's shared state; see the module comment. */
export interface StartContext {
  readonly config: Config;
  readonly logger: Logger;
  /**
   * The shutdown's steps, in the order they run (shutdown-steps.ts `closeAll`): a step
   * of the start puts what it started where it is to be stopped, before anything that
   * can fail after it, so that a start that fails stops it again.
   */
  readonly cleanup: CloseStep[];
  /** The bound of a shutdown step that waits on Redis: a command or two, each bounded by the command timeout. */
  readonly redisBound: { readonly boundMs: number };
  /**
   * Throws StartupError ("stopped by a signal while starting") when the process was
   * asked to stop meanwhile (StartOptions `signal`); called between steps.
   */
  readonly stopAsked: () => void;
  /** The start's waits on a Redis that stalls, one budget for all its steps and runs (start-stall.ts). */
  readonly stalls: StartStallWait;
}
