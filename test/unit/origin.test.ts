/**
 * `originAllowed` (src/gateway/connect-route.ts): which browser Origins may open
 * `/v1/connect` (DESIGN.md §6, §10 `PIXIU_ALLOWED_ORIGINS`). A browser sends its
 * serialized origin (RFC 6454 §6.1: scheme://host[:port], no path); a non-browser
 * client sends none and is allowed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { looseOrigins, nonWebOrigins, originAllowed } from '../../src/gateway/connect-route.js';

test('a request without Origin (a non-browser client) is allowed under every setting', () => {
  for (const allowed of [[], ['*'], ['https://app.example.com']]) {
    assert.equal(originAllowed(undefined, 'pixiu.example.com', allowed), true, JSON.stringify(allowed));
  }
  assert.equal(originAllowed(undefined, undefined, []), true);
});

test('* allows any Origin', () => {
  for (const origin of ['https://app.example.com', 'http://localhost:3000', 'https://evil.example']) {
    assert.equal(originAllowed(origin, 'pixiu.example.com', ['*']), true, origin);
  }
  assert.equal(originAllowed('https://x.example', 'pixiu.example.com', ['https://a.example', '*']), true);
});

test('a list allows exactly its origins: scheme, host and port all count', () => {
  const allowed = ['https://app.example.com', 'http://localhost:3000'];
  assert.equal(originAllowed('https://app.example.com', 'pixiu.example.com', allowed), true);
  assert.equal(originAllowed('http://localhost:3000', 'pixiu.example.com', allowed), true);
  for (const origin of [
    'http://app.example.com', // scheme
    'https://app.example.com:8443', // port
    'https://evil.app.example.com', // a subdomain is another origin
    'https://app.example.com.evil.example', // a suffix is another origin
    'http://localhost:3001',
    'https://pixiu.example.com', // the service's own host is not implied by a list
  ]) {
    assert.equal(originAllowed(origin, 'pixiu.example.com', allowed), false, origin);
  }
});

test('a list entry written with a trailing slash or capitals still names its origin', () => {
  assert.equal(originAllowed('https://app.example.com', 'pixiu.example.com', ['https://App.Example.com/']), true);
});

test('a list may name an origin of a non-web scheme, matched exactly', () => {
  assert.equal(originAllowed('chrome-extension://abcdef', 'pixiu.example.com', ['chrome-extension://abcdef']), true);
  assert.equal(originAllowed('chrome-extension://other', 'pixiu.example.com', ['chrome-extension://abcdef']), false);
});

test('an empty list allows only an Origin whose host is the request\'s own', () => {
  assert.equal(originAllowed('https://pixiu.example.com', 'pixiu.example.com', []), true);
  // The scheme is not compared: behind a proxy terminating TLS the node is reached over
  // http while the page's Origin is https (docs/protocol.md, the 403 row).
  assert.equal(originAllowed('https://127.0.0.1:18200', '127.0.0.1:18200', []), true, 'an https Origin on a node served over http');
  assert.equal(originAllowed('http://pixiu.example.com', 'pixiu.example.com', []), true, 'and the other way round');
  assert.equal(originAllowed('http://127.0.0.1:8080', '127.0.0.1:8080', []), true);
  assert.equal(originAllowed('http://[::1]:8080', '[::1]:8080', []), true);
  assert.equal(originAllowed('https://pixiu.example.com', 'Pixiu.Example.com', []), true, 'Host is case-insensitive');
  assert.equal(originAllowed('https://pixiu.example.com', 'pixiu.example.com:443', []), true, 'the default port may be written');
  for (const [origin, host] of [
    ['https://evil.example', 'pixiu.example.com'],
    ['http://127.0.0.1:3000', '127.0.0.1:8080'], // another port is another host
    ['https://pixiu.example.com', undefined], // no Host to compare with
  ] as const) {
    assert.equal(originAllowed(origin, host, []), false, `${origin} on ${String(host)}`);
  }
});

test('a malformed Origin is refused', () => {
  const malformed = [
    '', 'null', 'not a url', 'pixiu.example.com', '//pixiu.example.com',
    'https://pixiu.example.com/path', // an origin has no path
    'https://user@pixiu.example.com', // nor credentials
    'https://pixiu.example.com?x=1',
    'file:///etc/passwd',
  ];
  for (const origin of malformed) {
    assert.equal(originAllowed(origin, 'pixiu.example.com', []), false, `same-host rule: ${JSON.stringify(origin)}`);
    assert.equal(originAllowed(origin, 'pixiu.example.com', ['https://pixiu.example.com']), false, `list: ${JSON.stringify(origin)}`);
  }
});

test('nonWebOrigins names the list entries that are no serialized web origin, for the start-up warning', () => {
  // Entries compared as origins (a trailing slash, upper case) are web origins.
  assert.deepEqual(nonWebOrigins(['*', 'https://app.example.com', 'http://localhost:3000', 'https://App.example.com/']), []);
  assert.deepEqual(nonWebOrigins(['notaurl', 'chrome-extension://abc', 'https://ok.example', 'null']), ['notaurl', 'chrome-extension://abc', 'null']);
});

test('an Origin in capitals or with its default port is compared as its origin, by a list and by the own-host rule', () => {
  const list = ['https://app.example.com'];
  for (const origin of ['https://APP.example.com', 'HTTPS://app.example.com', 'https://app.example.com:443']) {
    assert.equal(originAllowed(origin, 'pixiu.example.com', list), true, origin);
  }
  assert.equal(originAllowed('https://app.example.com:8443', 'pixiu.example.com', list), false, 'another port stays another origin');
  assert.equal(originAllowed('HTTP://127.0.0.1:18200', '127.0.0.1:18200', []), true);
  assert.equal(originAllowed('http://Pixiu.Example.com:80', 'pixiu.example.com', []), true);
  assert.equal(originAllowed('https://pixiu.example.com/', 'pixiu.example.com', []), false, 'a path, even /, is no origin');
  assert.equal(originAllowed('NULL', 'pixiu.example.com', []), false);
});

test('a list entry with a path or credentials admits no Origin equal to it; looseOrigins names such entries and wildcards for the start-up warning', () => {
  const list = ['https://app.example.com/path', 'https://user:pw@a.example', 'https://*.example.com'];
  assert.equal(originAllowed('https://app.example.com/path', 'pixiu.example.com', list), false);
  assert.equal(originAllowed('https://user:pw@a.example', 'pixiu.example.com', list), false);
  assert.equal(originAllowed('https://app.example.com', 'pixiu.example.com', list), true, 'its origin counts');
  assert.equal(originAllowed('https://x.example.com', 'pixiu.example.com', list), false, 'no wildcards');
  assert.deepEqual(looseOrigins([...list, '*', 'https://ok.example', 'https://ok.example/', 'chrome-extension://abc']), list);
});
