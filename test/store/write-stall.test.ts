/**
 * A stalled disk (a frozen file system, a dying disk, a network volume's hiccup) holds
 * a partition's write, fsync and all, for as long as it lasts. Before the write-latency
 * watchdog every put behind it waited with no bound, new puts kept queueing and
 * readiness said nothing (a reviewer's finding, reproduced with `fsfreeze`). Now a
 * write in flight longer than the store's write timeout takes the partition out of
 * writes: its waiting puts are answered UNAVAILABLE (none was acknowledged), new ones
 * are refused at once, `writeProblem` names it; when the write ends the partition takes
 * writes again, and a retry with the same client_msg_id finds the message the stalled
 * write stored, not a second copy.
 *
 * Real LevelDB on a real stalled disk: an ext4 file system on a loop device, frozen
 * (test/harness/frozen-disk.ts; root only, skipped otherwise). Beside it, the watchdog
 * with a write that never ends (test/store/group-commit.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { isPixiuError } from '../../src/errors.js';
import { MessageStore, type NewMessage, type PutResult } from '../../src/store/message-store.js';
import { MsgKind } from '../../src/ids/msg-id.js';
import { rawKeys, storeOptions } from './fixtures/store-harness.js';
import { freezableDiskOrSkip } from '../harness/frozen-disk.js';
import { waitUntil, within } from '../harness/checks.js';
import { capturingLogger } from '../harness/log-capture.js';

const LIMIT_MS = 300;

function message(cid: string): NewMessage {
  return { kind: MsgKind.user, type: 't', data: { cid }, to: ['a'], clientMsgId: cid };
}

/** How a put settled: its result, or its error's code and message. */
async function outcome(put: Promise<PutResult>): Promise<PutResult | { code: string; message: string }> {
  try {
    return await put;
  } catch (err) {
    if (isPixiuError(err)) return { code: err.code, message: err.message };
    throw err;
  }
}

test('a write stalled past the write timeout answers its waiting puts 503, refuses new ones at once and says so; once it ends a retry converges', async (t) => {
  const disk = await freezableDiskOrSkip(t);
  if (disk === undefined) return;
  const dir = path.join(disk.dir, 'xiu');
  const { logger, lines } = capturingLogger();
  // No read cache: a read goes to the disk.
  const store = await MessageStore.open(storeOptions(dir, { partitions: 1, cacheBytes: 0, logger, writeTimeoutMs: LIMIT_MS }));
  disk.beforeUnmount(() => store.close());
  const before = await store.put(message('before'));
  assert.equal(store.writeProblem, undefined);

  disk.freeze();
  const frozenAt = performance.now();
  // In flight: its write blocks on the frozen disk ...
  const inFlight = outcome(store.put(message('in-flight')));
  // A fixed wait: nothing public says its batch is closed (writesInFlight counts the step
  // from before its wait for a write slot, while later puts still join the batch).
  await new Promise((resolve) => setTimeout(resolve, 50));
  // ... and this one waits behind it, for the next batch.
  const queued = outcome(store.put(message('queued')));
  const [first, second] = await within(5_000, 'the puts waiting on the stalled write', Promise.all([inFlight, queued]));
  const waited = performance.now() - frozenAt;
  for (const o of [first, second]) {
    assert.ok('code' in o, `refused, not acknowledged: ${JSON.stringify(o)}`);
    assert.equal(o.code, 'UNAVAILABLE');
    assert.match(o.message, /^message store partition 0 has had a write in flight for over 300 ms \(PIXIU_STORE_WRITE_TIMEOUT/);
  }
  assert.ok(waited >= LIMIT_MS, `answered after the timeout (${waited} ms)`);
  assert.match(store.writeProblem ?? '', /^message store partition 0 takes no messages now: message store partition 0 has had a write in flight for over 300 ms/);

  // A new put is refused at once: queued, it would wait as long as the disk is frozen.
  const refused = await within(1_000, 'a put to the stalled partition', outcome(store.put(message('during'))));
  assert.ok('code' in refused && refused.code === 'UNAVAILABLE', JSON.stringify(refused));
  // Reads go on.
  assert.equal((await within(2_000, 'a read', store.get(before.id)))?.id, before.id);
  const stalled = lines.filter((l) => l.msg?.startsWith('store partition write stalled') === true);
  assert.equal(stalled.length, 1, 'one error line per stall');
  assert.equal(stalled[0]?.level, 50);
  assert.equal(stalled[0]?.partition, 0);
  assert.ok(Number(stalled[0]?.ms) >= LIMIT_MS, JSON.stringify(stalled[0]));

  disk.thaw();
  await waitUntil('the partition takes writes again', async () => store.writeProblem === undefined);
  const ended = lines.filter((l) => l.msg?.startsWith('store partition write ended after a stall') === true);
  assert.deepEqual(ended.map((l) => [l.level, l.partition]), [[40, 0]]);
  assert.ok(Number(ended[0]?.ms) >= LIMIT_MS, JSON.stringify(ended[0]));
  // The stalled write landed when the disk came back: a retry answers that message ...
  const retried = await store.put(message('in-flight'));
  assert.equal(retried.duplicate, true, 'the stalled write stored it: the retry finds it');
  // ... and the put that was waiting behind it was never written: its retry stores it.
  assert.equal((await store.put(message('queued'))).duplicate, false);
  assert.equal((await store.put(message('during'))).duplicate, false);
  await store.close();

  const keys = await rawKeys(dir, 0);
  assert.deepEqual([...keys.clientIdValues.keys()].sort(), ['before', 'during', 'in-flight', 'queued']);
  assert.equal(keys.message.length, 4, 'each message stored once');
});
