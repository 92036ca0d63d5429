/**
 * How the long-running commands (`serve`, `connect`) take SIGINT and SIGTERM: the first
 * asks them to stop gracefully, a later one to stop at once. A repeat within
 * {@link REPEATED_SIGNAL_MS} of the first is the same request, not a second one.
 */

/**
 * A signal this soon after the first (ms) repeats it rather than asking for a forced
 * exit: Ctrl-C in a terminal reaches the command from the terminal (its process group)
 * and again from `npm start`, which passes the signals it gets on to its script, about a
 * millisecond apart; `timeout -s INT` signals the command and then its process group. A
 * person's second Ctrl-C comes later than this.
 */
export const REPEATED_SIGNAL_MS = 500;

/** What {@link onStopSignals} calls. */
export interface StopHandlers {
  /** The first SIGINT or SIGTERM: stop gracefully. */
  readonly stop: (signal: NodeJS.Signals) => void;
  /** A later one, more than {@link REPEATED_SIGNAL_MS} after the first: stop now. */
  readonly force: (signal: NodeJS.Signals) => void;
  /** A repeat within {@link REPEATED_SIGNAL_MS} of the first (ignored otherwise). */
  readonly repeated?: (signal: NodeJS.Signals) => void;
}

/**
 * Handles SIGINT and SIGTERM (or `signals`) until the returned function is called. The handlers stay
 * installed after the first signal: with none, a repeat would kill the process by
 * Node's default action (exit 130) in the middle of its graceful stop.
 * @returns removes the handlers
 */
export function onStopSignals(handlers: StopHandlers, signals: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM']): () => void {
  /** When the first signal came (performance.now(), ms), once one has. */
  let firstAt: number | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (firstAt === undefined) {
      firstAt = performance.now();
      handlers.stop(signal);
    } else if (performance.now() - firstAt < REPEATED_SIGNAL_MS) {
      handlers.repeated?.(signal);
    } else {
      handlers.force(signal);
    }
  };
  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.removeListener(signal, onSignal);
  };
}
