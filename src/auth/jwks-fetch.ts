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
