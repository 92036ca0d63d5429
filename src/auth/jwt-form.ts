/**
 * The written form a client JWT must have before its signature is checked (docs/protocol.md,
 * "Client tokens"): compact, canonical base64url, JSON parts without a byte order
 * mark. One check, run by the verifier for every path a client token takes
 * (`GET /v1/connect` by header or `?token=`, the `/v1/me` routes, a `refresh` frame), so
 * each refuses a token for its form with the same 401 and the same hint.
 */
import { maxHeaderSize } from 'node:http';
import { PixiuError } from '../errors.js';

/**
 * Longest client token taken, characters: at connect in `?token=` and in a `refresh`
 * frame. Node's limit on a request's line and headers (`maxHeaderSize`, 16 KiB unless
 * `--max-http-header-size` sets another; 431 past it), so a token that can connect in
 * the `Authorization` header can in `?token=` too, as browsers must (it was 8,192, and
 * a token of 8 – 16 KiB — many `channels` — connected by header but was refused 400 in
 * the query: a black-box tester's finding). The frame limit is usually lower for a refresh.
 */
export const MAX_TOKEN_CHARS = maxHeaderSize;

/**
 * A JWT in JWS compact serialization (RFC 7519 §3.1, RFC 7515 §7.1): three base64url
 * parts joined by dots, written without padding (RFC 7515 §2). jose decodes a part
 * leniently, so the same token with `=` after a part or `+` and `/` for `-` and `_`
 * verified too: one token, several spellings, which a proxy or log rule matching
 * tokens by their text would not know for one. Such a token is refused as any bad one.
 */
export const JWT_FORM = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * The refusal of a token with no dot at all, the shape of the API token: an integrator
 * sent it where a user's JWT belongs.
 */
export const NOT_A_JWT = 'invalid token: not a JWT; the client routes (/v1/me, /v1/connect) and a refresh take a user\'s JWT, the API token is for the producer routes';

/**
 * The refusal of a token with dots but not three parts: most often a JWT cut off (or
 * run on) when copied, for which the API token hint of {@link NOT_A_JWT} would mislead.
 * @param parts how many dot-separated parts the token has (2, or 4 and more)
 */
export function wrongPartCount(parts: number): string {
  return `invalid token: a JWT is three base64url parts joined by dots, this has ${parts}${parts < 3 ? ' (cut off when copied?)' : ''}`;
}

/**
 * The refusal of a header or payload that does not decode to a JSON object: garbage
 * in the shape of a JWT (`aaa.bbb.ccc`), which the canonical-form hints would explain
 * in RFC terms where "this is no JWT" is the answer.
 */
export function notWellFormed(part: 'header' | 'payload'): string {
  return `invalid token: not a well-formed JWT (its ${part} is not base64url JSON)`;
}

/**
 * The refusal of a token of three dot-separated parts not in base64url compact form
 * ({@link JWT_FORM}): a JWT re-encoded on its way (padded, or in standard base64 by a
 * proxy or library), which the API token hint would send the wrong way.
 */
export const NOT_COMPACT_JWT = 'invalid token: a JWT is base64url without padding (RFC 7515 §7.1, §2): A-Z a-z 0-9 - _ only, no =, + or /';

/** The parts of a compact JWT, in order, as a refusal names them. */
const PARTS = ['header', 'payload', 'signature'] as const;

/** A part of a compact JWT. */
export type JwtPart = (typeof PARTS)[number];

/** The base64url alphabet (RFC 4648 §5): a character's index is the 6 bits it carries. */
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * The unused low bits of a part's last character, by the part's length mod 4 (RFC 4648
 * §4): 2 characters end in one byte (12 bits, 4 unused), 3 in two (18 bits, 2 unused);
 * a whole group of 4 has none.
 */
const UNUSED_BITS: readonly number[] = [0, 0, 0b1111, 0b11];

/**
 * The refusal of a part whose last character has unused bits that are not zero. An
 * encoder sets them to zero and a decoder may refuse an encoding where they are not
 * (RFC 4648 §3.5); jose ignores them, so one token verified in several spellings (of
 * its 43-character HS256 signature 4, of an 86- or 342-character ES256 or RS256 one
 * 16), as with padding (JWT_FORM).
 */
export function nonZeroUnusedBits(part: JwtPart): string {
  return `invalid token: a JWT is canonical base64url (RFC 7515 §2, RFC 4648 §3.5): the unused bits of the ${part}'s last character are not zero`;
}

/** The refusal of a part of 4k + 1 characters, a length no bytes encode to (RFC 4648 §4). */
export function impossibleLength(part: JwtPart, chars: number): string {
  return `invalid token: a JWT is canonical base64url (RFC 7515 §2, RFC 4648 §3.5): the ${part} is ${chars} character${chars === 1 ? '' : 's'} long, a length no bytes encode to`;
}

/**
 * A UTF-8 byte order mark (EF BB BF) in base64url: 3 bytes are 4 characters, so a part
 * whose bytes begin with one begins with these and no other part does.
 */
const UTF8_BOM = '77u_';

/**
 * The refusal of a header or payload whose JSON begins with a byte order mark: "MUST
 * NOT" (RFC 8259 §8.1). jose's UTF-8 decoder drops a leading one unseen, so such a
 * token verified as if it had none: another spelling of the same claims.
 */
export function leadingBom(part: JwtPart): string {
  return `invalid token: the JWT's ${part} begins with a byte order mark (U+FEFF), which JSON text must not (RFC 8259 §8.1)`;
}

/**
 * Whether `part` (base64url, read leniently) decodes to a JSON object, as a JWT's
 * header and payload must (RFC 7515 §5.2, RFC 7519 §7.2). A leading byte order mark is
 * passed over: {@link leadingBom} answers for it.
 */
function isJsonObject(part: string): boolean {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8').replace(/^\uFEFF/, ''));
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/**
 * Refuses a token not written as a JWT in compact serialization, before any
 * verification: not three base64url parts without padding, one part not in canonical
 * form (its length and its last character's unused bits; the characters before carry
 * no unused bits), a header or payload that does not decode to a JSON object, or one
 * whose JSON begins with a byte order mark. Checks the text and decodes the header and
 * payload, in time linear in its length.
 *
 * The order, so that the most useful reason wins (docs/protocol.md, "Client tokens",
 * states it): the number of parts first (no dot: the API token, {@link NOT_A_JWT};
 * else {@link wrongPartCount}), then the alphabet ({@link NOT_COMPACT_JWT}), then part
 * by part — header, payload, signature —: a header or payload that is not JSON is
 * {@link notWellFormed} (garbage, not a JWT respelled), before its own form and any
 * later part's; then the canonical form; a leading byte order mark last.
 * @throws PixiuError UNAUTHORIZED {@link NOT_A_JWT}, {@link wrongPartCount},
 *   {@link NOT_COMPACT_JWT}, {@link notWellFormed}, {@link impossibleLength},
 *   {@link nonZeroUnusedBits} or {@link leadingBom} naming the first part at fault
 */
export function checkJwtForm(token: string): void {
  if (!JWT_FORM.test(token)) {
    const parts = token.split('.').length;
    throw new PixiuError('UNAUTHORIZED', parts === 3 ? NOT_COMPACT_JWT : parts === 1 ? NOT_A_JWT : wrongPartCount(parts));
  }
  let start = 0;
  for (const part of PARTS) {
    const dot = token.indexOf('.', start);
    const end = dot < 0 ? token.length : dot;
    // Garbage is told as such before any hint about its form, a later part's too
    // (`aaaa.bbbb.c`: its header, not its 1-character signature). The signature is
    // bytes, not JSON: its form is all there is to say of it.
    if (part !== 'signature' && !isJsonObject(token.slice(start, end))) throw new PixiuError('UNAUTHORIZED', notWellFormed(part));
    const tail = (end - start) % 4;
    const fault = tail === 1 ? impossibleLength(part, end - start)
      : tail > 1 && (ALPHABET.indexOf(token.charAt(end - 1)) & (UNUSED_BITS[tail] ?? 0)) !== 0 ? nonZeroUnusedBits(part) : undefined;
    if (fault !== undefined) throw new PixiuError('UNAUTHORIZED', fault);
    // The signature is bytes, not JSON: it may begin with any.
    if (part !== 'signature' && token.startsWith(UTF8_BOM, start)) throw new PixiuError('UNAUTHORIZED', leadingBom(part));
    start = end + 1;
  }
}
