/**
 * Requests refused for their request line or headers, before anything reads them
 * (docs/api.md, "Errors"): a version that is not HTTP/1.x, a missing or repeated `Host`,
 * more than one `Authorization`, a fragment or a badly percent-encoded query in the
 * target; and, on a route that takes
 * a body, a transfer coding other than chunked (501), a content coding (415) or a
 * charset other than UTF-8 (415). Node's parser and fastify's router let these through,
 * or read them wrongly.
 */
import type { FastifyInstance } from 'fastify';
import { PixiuError } from '../errors.js';
import { quotedText } from '../text-cut.js';
import { declaresJson, takesBody } from './validation.js';
import { closeAfter } from './closing-answers.js';
import { isUpgrade } from './upgrade-request.js';

/**
 * Adds the onRequest hook that refuses such requests (after the shutdown refusal, before
 * the routes' own hooks: the token is checked after it). It also marks the answer of a
 * request that asked for an upgrade `Connection: close`, whoever gives it.
 */
export function installRequestChecks(app: FastifyInstance): void {
  // Bodies are read as they come: a compressed one would be parsed as JSON and refused
  // with a misleading "not valid JSON". Say what is wrong instead (RFC 9110 §15.5.16:
  // 415 for an unsupported content coding).
  // Likewise a charset other than UTF-8: JSON exchanged between systems is UTF-8 (RFC
  // 8259 §8.1), and a body declared otherwise would be read as UTF-8 all the same.
  app.addHook('onRequest', (req, reply, done) => {
    // A request that asked for an upgrade ends its connection after its answer, whoever
    // gives it (src/gateway/upgrade-guard.ts); said here, in the first onRequest hook
    // that can refuse such a request, so that answers of later hooks (a refused token)
    // say so too. The two before it cannot: the shutdown refusal answers with
    // `Connection: close` anyway, and installBodyParsing' GET-body check skips upgrades.
    if (isUpgrade(req)) closeAfter(reply);
    // Node's parser also takes a request line with no version (read as HTTP/0.9) and
    // HTTP/2.0 spelt as text; neither is HTTP/1.x (RFC 9112 §2.3, §3).
    const version = req.raw.httpVersion;
    if (version !== '1.1' && version !== '1.0') {
      closeAfter(reply);
      done(new PixiuError('INVALID_REQUEST', version === '0.9'
        ? 'the request line has no HTTP version: send HTTP/1.1 (RFC 9112 §3)'
        : `HTTP/${version} is not spoken here: send HTTP/1.1 (RFC 9112 §2.3)`));
      return;
    }
    if (req.headers.host === undefined && version === '1.1') {
      closeAfter(reply);
      done(new PixiuError('INVALID_REQUEST', 'a Host header is required (RFC 9112 §3.2)'));
      return;
    }
    // Node keeps the first of several: which host was meant is unknown (RFC 9112 §3.2: 400).
    if (fieldLines(req.raw.rawHeaders, 'host') > 1) {
      closeAfter(reply);
      done(new PixiuError('INVALID_REQUEST', 'more than one Host header (RFC 9112 §3.2)'));
      return;
    }
    // Likewise Authorization, which is no list (RFC 9110 §11.6.2): Node keeps the first,
    // while a proxy or rate limiter in front may read the last and take the request for
    // another caller's (a black-box security tester's finding, walk22 F1). Refused on
    // every route, before any token is read: producer routes, /v1/me, /v1/connect (its
    // answer before the Origin's 403, as the Host's) and the internal routes.
    if (fieldLines(req.raw.rawHeaders, 'authorization') > 1) {
      done(new PixiuError('INVALID_REQUEST', 'more than one Authorization header: send one (RFC 9110 §11.6.2)'));
      return;
    }
    // A fragment never travels (a client strips it); one sent raw would be read as part
    // of the last query value (`limit=1#x`: "limit must be an integer").
    if (req.raw.url?.includes('#') === true) {
      done(new PixiuError('INVALID_REQUEST', 'the request target has a fragment (#…): it is not sent to a server (RFC 9112 §3.2); percent-encode # as %23 in a value'));
      return;
    }
    // The router refuses a path that is not validly percent-encoded (FST_ERR_BAD_URL);
    // fastify's query parser keeps a bad escape as it is (`epoch=%FF` read as "%FF"), so
    // the value would be misread, not refused. Refused here in the same words.
    if (!queryWellEncoded(req.raw.url ?? '')) {
      done(new PixiuError('INVALID_REQUEST', 'the URL is not validly percent-encoded'));
      return;
    }
    // A route that takes no body (the not-found one included) accepts an empty one
    // whatever its headers say, and refuses any other as "this route takes no body"
    // (validation.ts). On a route that exists its Content-Type then says nothing but
    // whether a body is JSON (read before it is refused, expect-continue.ts), and any
    // other is dropped: fastify answers one it cannot parse (`Content-Type:` empty, or
    // `;`) 415 before any parser runs, where docs/api.md promises an empty body is
    // accepted whatever its Content-Type (walk35 F1).
    if (!takesBody(req)) {
      if (!req.is404 && !declaresJson(req)) delete req.headers['content-type'];
      done();
      return;
    }
    // Node's parser reads a body whose last transfer coding is chunked, and ignores the
    // codings before it (`gzip, chunked`): the body would be parsed still encoded.
    const transfer = req.headers['transfer-encoding'];
    if (transfer !== undefined && transfer.split(',').some((c) => c.trim().toLowerCase() !== 'chunked')) {
      closeAfter(reply);
      done(new PixiuError('NOT_IMPLEMENTED', `Transfer-Encoding ${quotedText(transfer, 100)} is not supported: send the body with chunked alone, or with Content-Length`));
      return;
    }
    const coding = req.headers['content-encoding'];
    if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
      done(new PixiuError('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${quotedText(coding, 100)} is not supported: send the body uncompressed`));
      return;
    }
    const charset = charsetOf(req.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      done(new PixiuError('UNSUPPORTED_MEDIA_TYPE', `charset ${quotedText(charset, 100)} is not supported: JSON bodies are UTF-8`));
      return;
    }
    done();
  });
}

/**
 * The `charset` parameter of a Content-Type, lower-cased and unquoted (a quoted value as
 * it is between its quotes); undefined when none. Of several, the first that is not
 * UTF-8: `charset=utf-8; charset=latin1` is refused as its reverse is.
 */
function charsetOf(contentType: string | undefined): string | undefined {
  if (contentType === undefined || !contentType.toLowerCase().includes('charset')) return undefined;
  let first: string | undefined;
  for (const m of contentType.matchAll(/;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/gi)) {
    const value = (m[1] ?? m[2] ?? '').toLowerCase();
    if (value !== 'utf-8' && value !== 'utf8') return value;
    first ??= value;
  }
  return first;
}

/**
 * False when the request target's query string holds an escape that is not `%` and two
 * hex digits, or escapes that do not decode to UTF-8 (`%FF`, `%C3` alone): what
 * `decodeURIComponent` refuses (RFC 3986 §2.1).
 */
function queryWellEncoded(target: string): boolean {
  const at = target.indexOf('?');
  if (at < 0 || !target.includes('%', at)) return true;
  try {
    decodeURIComponent(target.slice(at + 1));
    return true;
  } catch {
    return false;
  }
}

/**
 * How many field lines named `name` (lower case) a request's raw headers (name, value,
 * name, value, …) hold; names are compared case-insensitively (RFC 9110 §5.1).
 */
function fieldLines(raw: readonly string[], name: string): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.length === name.length && raw[i]?.toLowerCase() === name) n++;
  return n;
}
