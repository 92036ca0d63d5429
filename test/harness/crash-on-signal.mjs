/**
 * A preload (`NODE_OPTIONS=--import <this file>`) for crash tests: on SIGUSR2 the
 * process gets a rejection no one handles, as a bug in the server would leave, which
 * Node turns into an uncaught exception (exit 1).
 */
process.on('SIGUSR2', () => {
  void Promise.reject(new Error('induced crash (test/harness/crash-on-signal.mjs)'));
});
