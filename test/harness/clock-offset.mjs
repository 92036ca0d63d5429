// Loaded with --import by a test node (test/rooms/clock-skew.test.ts).
// Preload for a test node whose machine clock is off by CLOCK_OFFSET_MS (a node on
// another machine whose NTP has drifted): Date.now() and new Date() read that clock.
const offset = Number(process.env.CLOCK_OFFSET_MS ?? 0);
const realNow = Date.now.bind(Date);
Date.now = () => realNow() + offset;
