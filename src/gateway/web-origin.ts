/**
 * The shapes of an Origin header (RFC 6454), shared by the Origin check
 * (connect-route.ts `originAllowed`) and the warn line of its refusals
 * (handshake-refusals.ts), which must not speak of a host an Origin does not have.
 */

/** `scheme://host[:port]` with nothing after the authority and no credentials (RFC 6454 §7.1). */
export const ORIGIN_FORM = /^[a-z][a-z\d+.-]*:\/\/[^/?#@\s]+$/i;

/** The RFC 6454 serialization of a URL's origin; undefined when it has none. */
export function serializedOrigin(text: string): string | undefined {
  try {
    const origin = new URL(text).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

/**
 * Whether an Origin header is a web origin, `scheme://host[:port]` with a host a
 * request's `Host` can be compared with: false for `null` (a page opened from a
 * file, a sandboxed frame), a non-web origin (`chrome-extension://id`), a path or
 * credentials.
 */
export function isWebOrigin(origin: string): boolean {
  return ORIGIN_FORM.test(origin) && serializedOrigin(origin) !== undefined;
}
