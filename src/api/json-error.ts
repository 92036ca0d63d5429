/**
 * Why a body is not JSON, in words a producer can act on: the parser's cause and where
 * it stopped, with a short excerpt around that place (the body's own text, cut), where
 * the answer said only "the body is not valid JSON" (an integrator newcomer could not
 * tell where a 7 MB batch broke). V8's `JSON.parse` names the position for most faults
 * ("… in JSON at position 56"); for an unexpected token it quotes the whole text instead
 * (left out here: it may be 1 MiB) and no position, and for a body that is one bad word
 * (`NaN`) it says nothing more, so there the place is found by json-fault.ts and the
 * token named is the word or character that starts there. Also the 415 for a body not
 * declared JSON at all ({@link notJsonTypeMessage}).
 */

import { cutText, quotedText, wholeSlice } from '../text-cut.js';
import { firstJsonFault } from './json-fault.js';

/** The refusal's words before the cause. */
export const NOT_JSON = 'the body is not valid JSON';

/** Characters of the body shown on each side of the position. */
const EXCERPT_SIDE = 16;

/** V8's "… in JSON at position 56", or "… after JSON at position 31" (Node 20). */
const AT_POSITION = /^(.*?)(?: in JSON)? at position (\d+)/s;
/** V8's "Unexpected token 'N', "…" is not valid JSON": the token, without the quoted text. */
const UNEXPECTED_TOKEN = /^(Unexpected token '.{1,2}'),/su;
/** A token that is a word (`NaN`, `undefined`, `to`), named whole from where it starts. */
const WORD = /[\p{L}\p{N}_$]+/uy;
/** Most characters of a word named as the unexpected token. */
const MAX_TOKEN = 16;

/**
 * `the body is not valid JSON: expected ',' or '}' after property value at byte 56
 * (near "1      x}")`; for what V8 gives no position (an unexpected token, a body that
 * is one bad word) `… unexpected token 'undefined' at byte 8 (near "{"data":undefined}")`,
 * the token being the word (letters, digits, `_`, `$`; cut to 16 characters) or the one
 * character where the grammar breaks; the bare {@link NOT_JSON} when the error is not
 * the parser's.
 * @param text the body as parsed
 * @param err what `JSON.parse(text)` threw
 */
export function notJsonMessage(text: string, err: unknown): string {
  const message = err instanceof SyntaxError ? err.message : '';
  const at = AT_POSITION.exec(message);
  if (at !== null) {
    const position = Number(at[2]);
    // V8 counts UTF-16 units; the byte offset is where a producer finds it in what it sent.
    return `${NOT_JSON}: ${lowerFirst(at[1] as string)} at byte ${Buffer.byteLength(text.slice(0, position))} (near ${excerpt(text, position)})`;
  }
  if (message === 'Unexpected end of JSON input') return `${NOT_JSON}: it ends before its JSON value does (${text.length} characters)`;
  if (!(err instanceof SyntaxError)) return NOT_JSON;
  const fault = firstJsonFault(text);
  if (fault !== undefined && fault < text.length) {
    return `${NOT_JSON}: unexpected token '${tokenAt(text, fault)}' at byte ${Buffer.byteLength(text.slice(0, fault))} (near ${excerpt(text, fault)})`;
  }
  if (fault === text.length) return `${NOT_JSON}: it ends before its JSON value does (${text.length} characters)`;
  // The grammar found nothing wrong where V8 did: its token, with no place.
  const token = UNEXPECTED_TOKEN.exec(message);
  return token === null ? NOT_JSON : `${NOT_JSON}: ${lowerFirst(token[1] as string)}`;
}

/** The word at `position`, cut to {@link MAX_TOKEN} characters, or its one character, escaped as in a JSON string. */
function tokenAt(text: string, position: number): string {
  WORD.lastIndex = position;
  const word = WORD.exec(text)?.[0];
  const token = word === undefined ? String.fromCodePoint(text.codePointAt(position) as number)
    : cutText(word, MAX_TOKEN);
  return JSON.stringify(token).slice(1, -1);
}

/** The text around `position`, at most {@link EXCERPT_SIDE} characters each side, as a JSON string (`…` where cut). */
function excerpt(text: string, position: number): string {
  const from = Math.max(0, position - EXCERPT_SIDE);
  const to = Math.min(text.length, position + EXCERPT_SIDE);
  return JSON.stringify(`${from > 0 ? '…' : ''}${wholeSlice(text, from, to)}${to < text.length ? '…' : ''}`);
}

function lowerFirst(s: string): string {
  return s.charAt(0).toLowerCase() + s.slice(1);
}

/**
 * The 415 message for a body that is not declared `application/json`: the Content-Type
 * the request sent (quoted and cut, src/text-cut.ts `quotedText`), or that it sent none,
 * and what to send — `curl -d` without `-H 'Content-Type: application/json'` sends
 * `application/x-www-form-urlencoded`, the commonest slip (docs/api.md "Errors").
 * @param contentType the request's `Content-Type` header as received, undefined when absent
 */
export function notJsonTypeMessage(contentType: string | undefined): string {
  const sent = contentType === undefined ? 'the request has no Content-Type' : `its Content-Type is ${quotedText(contentType, 100)}`;
  return `the body must be application/json, but ${sent}: send Content-Type: application/json`;
}
