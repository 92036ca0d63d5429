/**
 * Every Lua script opens with a Redis 7 flags line (`#!lua …`, src/redis/scripts.ts):
 * without one Redis checks a script for memory only at its first write, and append-7,
 * whose first write for a new inbox is a DEL (never checked), grew a Redis over
 * `maxmemory` under `noeviction` (docs/decisions.md, "maxmemory"). Which scripts may
 * still run then is pinned here: the read-only ones (`no-writes`) and those that only
 * free memory or write a bounded cursor (`allow-oom`). A script without the line is
 * refused when it is loaded.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { loadScripts, scriptFlags, scriptSha, scriptSource, type ScriptSpec } from '../../src/redis/scripts.js';

const SRC = new URL('../../src/', import.meta.url);

/** Each script that may run while Redis is over maxmemory, by file, and its flags. */
const RUN_WHEN_FULL: Readonly<Record<string, string>> = {
  'streams/lua/stream-bounds-2.lua': 'no-writes',
  'inbox/lua/locate-2.lua': 'no-writes',
  'inbox/lua/range-3.lua': 'no-writes',
  'inbox/lua/ack-7.lua': 'allow-oom',
  'cluster/lua/presence-prune-1.lua': 'allow-oom',
  'cluster/lua/presence-settle-2.lua': 'allow-oom',
  'redis/lua/delete-if-1.lua': 'allow-oom',
};

/** A spec for `file` (relative to src/). */
function spec(file: string): ScriptSpec {
  return { file: new URL(file, SRC), numberOfKeys: 1 };
}

/** Every script under src/: the `.lua` files, not the pieces scripts include (`includes/`, src/redis/scripts.ts). */
const scripts = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.lua') && !f.split(path.sep).includes('includes')).sort();

test('every script in src opens with a #!lua line; only the reading, freeing and ack scripts may run while Redis is full', () => {
  assert.ok(scripts.length >= 17, `found ${scripts.join(', ')}`);
  const flagged: Record<string, string> = {};
  for (const file of scripts) {
    const flags = [...scriptFlags(spec(file))].join(',');
    if (flags !== '') flagged[file] = flags;
  }
  assert.deepEqual(flagged, RUN_WHEN_FULL);
});

test('loadScripts refuses a script without a #!lua line, and so does scriptFlags', (t) => {
  const redis = new Redis({ lazyConnect: true });
  t.after(() => redis.disconnect());
  assert.doesNotThrow(() => loadScripts(redis, [spec('inbox/lua/range-3.lua')]));
  const dir = mkdtempSync(path.join(tmpdir(), 'pixiu-flags-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const text of ['--[[ no flags line ]]\nreturn 1\n', '#!lua flags=allow-stale\nreturn 1\n']) {
    const file = path.join(dir, `s${text.length}.lua`);
    writeFileSync(file, text);
    const bad = { ...spec('x'), file: pathToFileURL(file) };
    assert.throws(() => scriptFlags(bad), /does not open with a #!lua flags line/);
    assert.throws(() => loadScripts(redis, [bad]), /does not open with a #!lua flags line/);
  }
});

test('a script\'s `--@include includes/…` line is replaced by the file it names, and the SHA is of the whole text', () => {
  const included = readFileSync(new URL('inbox/lua/includes/keep-cursors.lua', SRC), 'utf8').trimEnd();
  for (const file of scripts) {
    const raw = readFileSync(new URL(file, SRC), 'utf8');
    const source = scriptSource(spec(file));
    assert.doesNotMatch(source, /^--@include /m, `${file}: every include line expanded`);
    if (raw.includes('--@include includes/keep-cursors.lua')) {
      assert.ok(source.includes(included), `${file} holds the piece`);
      assert.equal(scriptSha(spec(file)), createHash('sha1').update(source).digest('hex'));
    }
  }
  assert.deepEqual(scripts.filter((f) => readFileSync(new URL(f, SRC), 'utf8').includes('--@include ')).map((f) => path.basename(f)), ['append-13.lua', 'rotate-7.lua']);
});
