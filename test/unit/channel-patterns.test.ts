/**
 * Channel names and the patterns of a JWT's `channels` claim (src/channels/patterns.ts,
 * DESIGN.md §6, §8): a name is 1–128 of `A-Z a-z 0-9 _ : -` in `.`-separated segments;
 * a pattern segment `*` matches exactly one whole segment; everything else matches
 * itself exactly. No I/O.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { channelAllowed, isChannelName, isChannelPattern, MAX_CHANNEL_LENGTH, patternAllows } from '../../src/channels/patterns.js';

test('channel names: segments of A-Z a-z 0-9 _ : - separated by single dots, 1-128 characters', () => {
  for (const name of ['a', 'live', 'live.stream42.chat', 'A_b-c:d', 'x.y.z.w', '0', 'user:42.inbox', 'c'.repeat(MAX_CHANNEL_LENGTH)]) {
    assert.equal(isChannelName(name), true, name);
  }
  for (const name of [
    '', '.', 'a.', '.a', 'a..b', 'a b', 'a\tb', 'a*', '*', 'a.*.b', 'a/b', '{a}', 'a%b', 'café', 'a\nb', 'emoji😀',
    'c'.repeat(MAX_CHANNEL_LENGTH + 1),
  ]) {
    assert.equal(isChannelName(name), false, JSON.stringify(name));
  }
});

test('* matches exactly one whole segment, at any position', () => {
  assert.equal(patternAllows('live.*.chat', 'live.s1.chat'), true);
  assert.equal(patternAllows('live.*.chat', 'live.a-b_c:d.chat'), true);
  assert.equal(patternAllows('*.chat', 'x.chat'), true);
  assert.equal(patternAllows('live.*', 'live.x'), true);
  assert.equal(patternAllows('*', 'anything'), true);
  assert.equal(patternAllows('*.*', 'a.b'), true);

  assert.equal(patternAllows('live.*.chat', 'live.chat'), false, 'not zero segments');
  assert.equal(patternAllows('live.*.chat', 'live.a.b.chat'), false, 'not two segments');
  assert.equal(patternAllows('live.*', 'live'), false);
  assert.equal(patternAllows('live.*', 'live.a.b'), false, 'not a prefix match');
  assert.equal(patternAllows('*', 'a.b'), false);
  assert.equal(patternAllows('*.*', 'a'), false);
  assert.equal(patternAllows('*.chat', 'x.chatter'), false);
});

test('a segment that is not exactly * matches only itself: no partial wildcards, case-sensitive', () => {
  assert.equal(patternAllows('news', 'news'), true);
  assert.equal(patternAllows('a.b.c', 'a.b.c'), true);
  assert.equal(patternAllows('news', 'News'), false);
  assert.equal(patternAllows('news', 'newsroom'), false);
  assert.equal(patternAllows('news', 'news.local'), false);
  assert.equal(patternAllows('live*', 'live1'), false, '* inside a segment is literal');
  assert.equal(patternAllows('live*', 'live*'), true, 'a literal segment equals itself (and live* is no channel name)');
  assert.equal(patternAllows('l*e.chat', 'live.chat'), false);
  assert.equal(patternAllows('**', 'a'), false);
  assert.equal(patternAllows('**', 'a.b'), false);
  assert.equal(patternAllows('', 'a'), false);
});

test('channelAllowed: any pattern of the claim allows; none, an empty claim, or a bad name refuses', () => {
  const claim = ['live.*.chat', 'news', 'user:42.*'];
  assert.equal(channelAllowed('live.s9.chat', claim), true);
  assert.equal(channelAllowed('news', claim), true);
  assert.equal(channelAllowed('user:42.inbox', claim), true);
  assert.equal(channelAllowed('user:43.inbox', claim), false);
  assert.equal(channelAllowed('weather', claim), false);
  assert.equal(channelAllowed('news', []), false, 'no claim, no channels');
  // A name that is no channel is refused even when a pattern would match its text.
  assert.equal(channelAllowed('live*', ['live*']), false);
  assert.equal(channelAllowed('a..b', ['a..b']), false);
  assert.equal(channelAllowed('a..b', ['a.*.b']), false);
  assert.equal(channelAllowed('', ['']), false);
  assert.equal(channelAllowed('*', ['*']), false, 'the pattern * is not itself a channel');
  assert.equal(channelAllowed('x'.repeat(MAX_CHANNEL_LENGTH + 1), ['*']), false);
});

test('isChannelPattern: a channel name whose whole segments may be *, within the name\'s length', () => {
  for (const p of ['live.*.chat', '*', '*.*', 'news', '*.a.*', 'x'.repeat(128)]) assert.equal(isChannelPattern(p), true, p);
  for (const p of ['', '**', 'a..b', 'live.*x', 'x*.y', '.', 'a.*.', 'bad name', 'x'.repeat(129)]) assert.equal(isChannelPattern(p), false, p);
});
