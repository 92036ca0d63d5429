/**
 * The fetch a JWKS is read with (jose's `customFetch`): the global fetch, with the
 * answer's body read up to {@link MAX_JWKS_BYTES}. jose reads the whole body of
 * whatever the URL answers; a 100 MB answer (a misconfigured URL, a hostile host) was
 * held in memory and parsed, taking the node to ~680 MB (a fresh tester's finding).
 */

/** Largest JWKS answer read, bytes: a key set of a few dozen keys is a few KiB. */
export const MAX_JWKS_BYTES = 1024 * 1024;

/**
 * `fetch`, with a body longer than {@link MAX_JWKS_BYTES} refused.
 * @returns the response, its body read whole (so at most the cap is held)
 * @throws Error (fetch's failures, and a body over the cap): the verifier answers 503
 */
export async function cappedFetch(url: string, options: RequestInit): Promise<Response> {
  const res = await fetch(url, options);
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > MAX_JWKS_BYTES) {
    await res.body?.cancel();
    throw new Error(`the JWKS answer is ${declared} bytes, over the ${MAX_JWKS_BYTES} read`);
  }
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  const reader = res.body?.getReader();
  for (;;) {
    const next = await reader?.read();
    if (next === undefined || next.done) break;
    bytes += next.value.byteLength;
    if (bytes > MAX_JWKS_BYTES) {
      await reader?.cancel();
      throw new Error(`the JWKS answer is over the ${MAX_JWKS_BYTES} bytes read`);
    }
    chunks.push(next.value);
  }
  return new Response(Buffer.concat(chunks), { status: res.status, statusText: res.statusText, headers: res.headers });
}

/**
 * {@link cappedFetch} that remembers a failed fetch: for `cooldownMs` after one (no
 * answer, not a 200, not a JSON key set) it fails at once without asking the URL
 * again. jose's cooldown runs only from a fetch that succeeded, so while the identity
 * provider was down every token (each connect, each made-up `kid`) fetched the set
 * once more: hundreds of requests a second from one node to a provider already failing.
 *
 * @returns a fetch for jose's `customFetch`, with its own memory of the last failure
 */
export function cooledFetch(cooldownMs: number): (url: string, options: RequestInit) => Promise<Response> {
  let failedAt = Number.NEGATIVE_INFINITY; // performance.now() of the last failure
  return async (url, options) => {
    if (performance.now() - failedAt < cooldownMs) {
      throw new Error(`the JWKS could not be fetched less than ${cooldownMs} ms ago; not asked again yet`);
    }
    try {
      const res = await cappedFetch(url, options);
      if (res.status !== 200 || !isKeySet(await res.clone().text())) failedAt = performance.now();
      return res;
    } catch (err) {
      failedAt = performance.now();
      throw err;
    }
  };
}

/** True when `text` is JSON of an object with a `keys` array of objects (jose's `isJwkSet`: what it takes for a key set). */
function isKeySet(text: string): boolean {
  try {
    const v = JSON.parse(text) as unknown;
    const isObject = (o: unknown): boolean => typeof o === 'object' && o !== null && !Array.isArray(o);
    const keys = isObject(v) ? (v as { keys?: unknown }).keys : undefined;
    return Array.isArray(keys) && keys.every(isObject);
  } catch {
    return false;
  }
}
