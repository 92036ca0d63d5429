/**
 * The check of PIXIU_TRUST_PROXY's entries (src/config/trust-proxy.ts) against what
 * fastify hands them to, @fastify/proxy-addr: every entry it lets through compiles and
 * matches what it names, and it refuses, naming the setting, what proxy-addr would
 * throw on from inside fastify or would read as an address nobody meant.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import proxyaddr from '@fastify/proxy-addr';
import { loadConfig } from '../../src/config/config.js';
import { trustProxyEntryProblem } from '../../src/config/trust-proxy.js';

test('the entries it takes compile in proxy-addr and trust what they name', () => {
  const cases: Array<[string, string, string]> = [
    // [entry, an address it trusts, one it does not]
    ['127.0.0.1', '127.0.0.1', '127.0.0.2'],
    ['127.0.0.1', '::ffff:127.0.0.1', '::1'],
    ['10.0.0.0/8', '10.200.3.4', '11.0.0.1'],
    ['192.168.1.0/24', '::ffff:192.168.1.9', '192.168.2.1'],
    ['::1', '::1', '127.0.0.1'],
    // Neither is IPv4-mapped: ::ffff:1 is ::255.255.0.1, ::a00:1 the deprecated IPv4-compatible form.
    ['::ffff:1', '::ffff:1', '::1'],
    ['2001:db8::/32', '2001:db8:1::5', '2001:db9::1'],
    ['loopback', '127.5.5.5', '10.0.0.1'],
    ['uniquelocal', '172.16.0.1', '8.8.8.8'],
    ['10.1.2.3/32', '10.1.2.3', '10.1.2.4'],
  ];
  for (const [entry, trusted, other] of cases) {
    assert.equal(trustProxyEntryProblem(entry), undefined, entry);
    const trust = proxyaddr.compile([entry]);
    assert.equal(trust(trusted, 0), true, `${entry} trusts ${trusted}`);
    assert.equal(trust(other, 0), false, `${entry} does not trust ${other}`);
  }
});

test('it refuses what proxy-addr throws on and what it reads as an address nobody meant', () => {
  const refused: Array<[string, RegExp]> = [
    ['foo', /is not an IPv4 or IPv6 address or CIDR range/],
    ['proxy.internal', /is not an IPv4 or IPv6 address/],
    ['10.0.0.0/33', /no prefix length from 1 to 32/],
    // Every address (walk36 F3: refused as a bad prefix length, said as what it means).
    ['0.0.0.0/0', /"0\.0\.0\.0\/0": a prefix length of 0 is every address: trusting every address would let any client choose the address logged for it/],
    ['::/0', /"::\/0": a prefix length of 0 is every address/],
    ['10.0.0.0/0', /a prefix length of 0 is every address/],
    // A list separated otherwise than by commas (walk36 F3: it was "no prefix length").
    ['10.0.0.0/8 10.1.0.0/16', /"10\.0\.0\.0\/8 10\.1\.0\.0\/16" is not one address or range: separate entries with commas/],
    ['10.0.0.1 10.0.0.2', /separate entries with commas/],
    ['10.0.0.1\t10.0.0.2', /separate entries with commas/],
    ['10.0.0.1;10.0.0.2', /separate entries with commas/],
    ['2001:db8::/129', /no prefix length from 1 to 128/],
    ['10.0.0.0/8x', /no prefix length/],
    ['10.0.0.0/', /no prefix length/],
    // proxy-addr takes these, as 127.0.0.1, 1.2.0.3, a /8 and a mapped /16 matching nothing.
    ['127.1', /is not an IPv4 or IPv6 address/],
    ['0177.0.0.1', /is not an IPv4 or IPv6 address/],
    ['1.2.3', /is not an IPv4 or IPv6 address/],
    ['10.0.0.0/08', /no prefix length/],
    ['10.0.0.0/255.0.0.0', /no prefix length/],
    ['::ffff:10.0.0.1/16', /IPv4-mapped address: write the IPv4 address/],
    // The same address however written: with a prefix, proxy-addr compiles it and trusts nothing.
    ['0:0:0:0:0:ffff:10.0.0.1/16', /IPv4-mapped/],
    ['0:0:0:0:0:ffff:a00:1/16', /IPv4-mapped/],
    ['::FFFF:A00:1', /IPv4-mapped/],
    ['0000:0000:0000:0000:0000:ffff:0a00:0001/112', /IPv4-mapped/],
    ['0::ffff:10.0.0.1', /IPv4-mapped/],
    ['true', /trusting every hop or a hop count would let any client choose the address logged for it/],
    ['TRUE', /trusting every hop/],
    ['2', /trusting every hop or a hop count/],
  ];
  for (const [entry, words] of refused) assert.match(trustProxyEntryProblem(entry) ?? 'accepted', words, entry);
});

test('loadConfig reads PIXIU_TRUST_PROXY as a list, empty by default, empty entries skipped as PIXIU_ALLOWED_ORIGINS\'s, and refuses a bad entry naming the setting', () => {
  assert.deepEqual(loadConfig({}).trustProxy, []);
  assert.deepEqual(loadConfig({ PIXIU_TRUST_PROXY: ' 10.0.0.5 , 10.0.1.0/24,' }).trustProxy, ['10.0.0.5', '10.0.1.0/24']);
  // Skipped, as in every list setting: the documented rule (README "Addresses", --help).
  for (const [value, read] of [[',', []], ['10.0.0.5,', ['10.0.0.5']], [',,10.0.0.5,,', ['10.0.0.5']]] as const) {
    assert.deepEqual(loadConfig({ PIXIU_TRUST_PROXY: value }).trustProxy, read, value);
    assert.deepEqual(loadConfig({ PIXIU_ALLOWED_ORIGINS: value.replace('10.0.0.5', 'https://a.example') }).allowedOrigins, read.map(() => 'https://a.example'), value);
  }
  assert.throws(() => loadConfig({ PIXIU_TRUST_PROXY: '10.0.0.1 10.0.0.2' }),
    /PIXIU_TRUST_PROXY="10\.0\.0\.1 10\.0\.0\.2" is not valid: "10\.0\.0\.1 10\.0\.0\.2" is not one address or range: separate entries with commas/);
  assert.deepEqual(loadConfig({}, { trustProxy: 'loopback' }).trustProxy, ['loopback']);
  assert.throws(() => loadConfig({ PIXIU_TRUST_PROXY: '10.0.0.5,10.0.0.256' }),
    /PIXIU_TRUST_PROXY="10\.0\.0\.5,10\.0\.0\.256" is not valid: "10\.0\.0\.256" is not an IPv4 or IPv6 address or CIDR range/);
  assert.throws(() => loadConfig({}, { trustProxy: 'true' }), /--trust-proxy="true" is not valid: "true" is no proxy address/);
});
