/**
 * What the tests of the secret checks (src/cluster/secret-digests.ts, shared-settings.ts,
 * joiner-secrets.ts) read in a node's log, and the digests an older release's entry holds.
 */
import { createHmac } from 'node:crypto';
import type { LogLine } from '../harness/log-capture.js';

/** The error lines about a secret (field `secret`: `PIXIU_API_TOKEN` or `client-token key`). */
export function secretLines(lines: readonly LogLine[]): LogLine[] {
  return lines.filter((l) => l.level === 50 && l.secret !== undefined);
}

/**
 * A secret's digest as releases before 3545053 computed it (2e0830c, the first scheme):
 * HMAC-SHA-256 keyed by it over the v1 label, 64 bits in hex. Written out here, not
 * taken from the code under test.
 */
export function oldDigest(secret: string): string {
  return createHmac('sha256', secret).update('pixiu node-settings secret digest v1').digest('hex').slice(0, 16);
}
