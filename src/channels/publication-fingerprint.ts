/**
 * What a channel publication's `client_msg_id` is compared by (docs/api.md
 * "Channels"): a retry under the key must carry the same `type` and `data`, compared
 * as JSON values, as a message's retry is (src/ingest/same-message.ts): object keys in
 * any order are the same, `1.0` is `1`, array order counts. A publication is not
 * stored, so what the first one was is kept in Redis as a fingerprint of it, beside
 * its id (channel-publish-4.lua), not as its content.
 */
import { createHash } from 'node:crypto';
import { configure } from 'safe-stable-stringify';

/** JSON text with every object's keys sorted (Array.prototype.sort: by UTF-16 code units), at every depth. */
const canonicalJson = configure({ deterministic: true, bigint: false, circularValue: Error });

/**
 * The fingerprint of a publication's content: SHA-256 (hex) of its type and its data
 * written as canonical JSON (object keys sorted by UTF-16 code units, at every depth).
 * @param dataJson the data as `JSON.stringify` wrote it (record.ts `publicationDataJson`)
 */
export function publicationFingerprint(type: string, dataJson: string): string {
  const canonical = canonicalJson(JSON.parse(dataJson)) as string;
  return createHash('sha256').update(`${JSON.stringify(type)}\n${canonical}`).digest('hex');
}
