/**
 * The labelled counters of a small, fixed label set show every series at 0 from the
 * start (docs/api.md, "GET /metrics"): an alert on one reads 0, not "no data", and
 * `rate()` sees the first event (an ops newcomer's finding).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Metrics } from '../../src/api/metrics.js';
import { ERRORS } from '../../src/errors.js';
import { metricSample } from '../harness/checks.js';

test('a fresh node\'s /metrics has its fixed label sets at 0: ingest created/duplicate/abandoned, Redis error kinds, every error code, every frame type, the server\'s close codes and the usual client ones, acks, ack cursor writes, handshakes, gap reasons, fetch reads', async () => {
  const text = await new Metrics().registry.metrics();
  const zero = [
    ...['message', 'batch', 'broadcast', 'channel'].flatMap((route) => ['created', 'duplicate'].map((outcome) => `pixiu_ingest_messages_total{route="${route}",outcome="${outcome}"}`)),
    ...['message', 'batch', 'broadcast'].map((route) => `pixiu_ingest_messages_total{route="${route}",outcome="abandoned"}`),
    ...['message', 'batch', 'broadcast', 'channel'].map((route) => `pixiu_ingest_duration_seconds_count{route="${route}"}`),
    ...['moved', 'refused', 'idle'].map((outcome) => `pixiu_acks_total{outcome="${outcome}"}`),
    ...['written', 'failed'].map((result) => `pixiu_ack_cursor_writes_total{result="${result}"}`),
    ...['accepted', 'abandoned', 'busy', 'full', 'INVALID_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED', 'UNAVAILABLE'].map((outcome) => `pixiu_ws_handshakes_total{outcome="${outcome}"}`),
    'pixiu_redis_errors_total{kind="connection"}', 'pixiu_redis_errors_total{kind="request"}',
    ...Object.keys(ERRORS).map((code) => `pixiu_http_errors_total{code="${code}"}`),
    ...['welcome', 'msg', 'gap', 'reset', 'bcast', 'pub', 'subscribed', 'pong', 'error'].map((t) => `pixiu_ws_frames_sent_total{t="${t}"}`),
    ...[1000, 1001, 1006, 1008, 1009, 1011, 4001, 4002, 4003, 4008, 4009].map((code) => `pixiu_ws_closes_total{code="${code}",by="server"}`),
    ...[1000, 1001, 1006].map((code) => `pixiu_ws_closes_total{code="${code}",by="client"}`),
    ...['trimmed', 'expired', 'undeliverable'].flatMap((reason) => [`pixiu_delivery_gap_seqs_total{reason="${reason}"}`, `pixiu_delivery_gaps_total{reason="${reason}"}`]),
    ...['inbox', 'records'].map((read) => `pixiu_delivery_fetch_failures_total{read="${read}"}`),
    'pixiu_broadcast_gaps_total', 'pixiu_channel_gaps_total',
  ];
  assert.deepEqual(zero.filter((series) => metricSample(text, series) !== 0), []);
  // Outside the fixed sets: no series until the first event.
  assert.equal(metricSample(text, 'pixiu_ws_closes_total{code="other",by="client"}'), undefined);
  assert.equal(metricSample(text, 'pixiu_ingest_messages_total{route="message",outcome="INVALID_REQUEST"}'), undefined);
  assert.equal(metricSample(text, 'pixiu_ws_handshakes_total{outcome="INTERNAL"}'), undefined);
  assert.equal(metricSample(text, 'pixiu_ingest_messages_total{route="channel",outcome="abandoned"}'), undefined, 'a publication is never abandoned');
});

test('an inbox gap counts its seqs by reason only when not marked redelivered: of a gap split in two after a reset, the news part', async () => {
  const metrics = new Metrics();
  // After a reset: 1..4 the device had under the old epoch (marked), 5..9 it never had.
  metrics.delivery.countGap({ t: 'gap', from: 1, to: 4, reason: 'trimmed', redelivered: true });
  metrics.delivery.countGap({ t: 'gap', from: 5, to: 9, reason: 'trimmed' });
  metrics.delivery.countGap({ t: 'gap', from: 12, to: 12, reason: 'undeliverable' });
  const text = await metrics.registry.metrics();
  assert.deepEqual(
    ['trimmed', 'expired', 'undeliverable'].map((reason) => [
      metricSample(text, `pixiu_delivery_gap_seqs_total{reason="${reason}"}`), metricSample(text, `pixiu_delivery_gaps_total{reason="${reason}"}`),
    ]),
    [[5, 1], [0, 0], [1, 1]],
  );
});
