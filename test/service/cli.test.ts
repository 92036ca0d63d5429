/**
 * The `pixiu` command (DESIGN.md §10): `token` mints a client JWT with the data dir's
 * secret, `serve --help` lists the settings by environment name, and bad input exits
 * 1 with a message saying what was wrong.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { createVerifier } from '../../src/auth/jwt.js';
import { runCliOnce } from '../harness/cli-process.js';
import { REPO_ROOT, cliEntry, runCli, runEach, tempDataDir } from '../harness/pixiu-server.js';

test('pixiu token <uid> --tags a,b --ttl 1h prints a JWT that verifies with the data dir secret', async (t) => {
  const dataDir = await tempDataDir(t);
  await mkdir(path.join(dataDir, 'secrets'));
  await writeFile(path.join(dataDir, 'secrets', 'jwt-secret'), 'the-data-dir-secret-of-at-least-32-chars\n');
  const run = await runCli(['token', 'ann', '--tags', 'a,b', '--ttl', '1h'], { PIXIU_DATA_DIR: dataDir });
  assert.equal(run.code, 0, run.stderr);
  const token = run.stdout.trim();
  assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
  const secret = 'the-data-dir-secret-of-at-least-32-chars';
  const claims = await createVerifier({ kind: 'secret', secret })(token);
  assert.equal(claims.user, 'ann');
  assert.deepEqual(claims.tags, ['a', 'b']);
  assert.ok(Math.abs(claims.expiresAtMs - (Date.now() + 3_600_000)) < 60_000, `exp ${claims.expiresAtMs}`);
  await assert.rejects(createVerifier({ kind: 'secret', secret: 'another-secret-of-at-least-32-chars!' })(token), /invalid token/);
});

test('pixiu token signs with PIXIU_JWT_SECRET when it is set', async (t) => {
  const secret = 'a-configured-secret-of-32-chars-or-more';
  const run = await runCli(['token', 'bo'], { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: secret });
  assert.equal(run.code, 0, run.stderr);
  assert.equal((await createVerifier({ kind: 'secret', secret })(run.stdout.trim())).user, 'bo');
});

test('pixiu token reads only the settings it lists: a bad server-only one in the environment (a shared env file) does not stop it', async (t) => {
  const secret = 'a-configured-secret-of-32-chars-or-more';
  const run = await runCli(['token', 'bo'], { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: secret, PIXIU_HEARTBEAT: '2m', PIXIU_PARTITIONS: '3', PIXIU_REDIS_URL: 'http://x' });
  assert.equal(run.code, 0, run.stderr);
  assert.equal((await createVerifier({ kind: 'secret', secret })(run.stdout.trim())).user, 'bo');
  // Its own settings are still checked.
  const bad = await runCli(['token', 'bo'], { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: secret, PIXIU_JWT_AUDIENCE: 'app ' });
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /PIXIU_JWT_AUDIENCE="app " is not valid/);
});

test('pixiu token and pixiu connect never generate a secret: with none in the data dir they exit 1 saying where to look', async (t) => {
  const dataDir = await tempDataDir(t);
  for (const [args, run] of await runEach([['token', 'ann'], ['connect', 'ann', '--port', '1']], (args) => runCli(args, { PIXIU_DATA_DIR: dataDir }))) {
    assert.equal(run.code, 1, args.join(' '));
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /no jwt-secret at .*secrets.*jwt-secret, where `pixiu serve` keeps the secret it generates when given no key; a serve given its key keeps no file: pass the same secret with --jwt-secret \(PIXIU_JWT_SECRET\)/);
    assert.match(run.stderr, /Else start `pixiu serve` with this data dir first, or point at the service's data dir with --data-dir/);
  }
  assert.deepEqual(await readdir(dataDir), [], 'nothing was created');
});

test('pixiu serve shows generated secrets even when the start fails afterwards (Redis unreachable); a port in use stops it before any is generated', async (t) => {
  const dataDir = await tempDataDir(t);
  const run = await runCli(['serve'], { PIXIU_DATA_DIR: dataDir, PIXIU_PORT: '0', PIXIU_REDIS_URL: 'redis://127.0.0.1:1' });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /cannot reach Redis/);
  const apiToken = (await readFile(path.join(dataDir, 'secrets', 'api-token'), 'utf8')).trim();
  const jwtSecret = (await readFile(path.join(dataDir, 'secrets', 'jwt-secret'), 'utf8')).trim();
  assert.ok(run.stderr.includes(apiToken) && run.stderr.includes(jwtSecret), run.stderr);

  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.after(() => blocker.close());
  const port = (blocker.address() as net.AddressInfo).port;
  const blockedDir = await tempDataDir(t);
  const blocked = await runCli(['serve'], { PIXIU_DATA_DIR: blockedDir, PIXIU_PORT: String(port), PIXIU_REDIS_URL: 'redis://127.0.0.1:1' });
  assert.equal(blocked.code, 1);
  assert.match(blocked.stderr, /EADDRINUSE/);
  assert.doesNotMatch(blocked.stderr, /generated/, 'no secret shown next to the failure');
  assert.deepEqual(await readdir(blockedDir), [], 'nothing generated');
});

test('pixiu token with a bad user id or --ttl exits 1 with a clear message', async (t) => {
  const env = { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: 'a-configured-secret-of-32-chars-or-more' };
  const badUid = await runCli(['token', 'a b'], env);
  assert.equal(badUid.code, 1);
  assert.equal(badUid.stdout, '');
  assert.match(badUid.stderr, /invalid user id "a b"/);
  for (const [ttl, badTtl] of await runEach(['soon', '', ' ', '0', '500ms', '1500ms', '1.5s', '366d', '99999999999999', '1M'], (ttl) => runCli(['token', 'ann', '--ttl', ttl], env))) {
    assert.equal(badTtl.code, 1, ttl);
    assert.equal(badTtl.stdout, '');
    assert.match(badTtl.stderr, new RegExp(`invalid --ttl "${ttl}": a whole number of seconds from 1s to 365d`));
  }
  // `1M`, a month to many (ISO 8601) and a minute to the `ms` package, is refused saying so (walk31 F6).
  assert.match((await runCli(['token', 'ann', '--ttl', '1M'], env)).stderr, /30m, 1h, 7d \(an uppercase M is refused: minutes or months would be a guess/);
});

/**
 * Runs `pixiu <args> <uid>` with the user id given as raw bytes, as a shell passes
 * them: `bytes` is a printf format (`a\377`), so bytes that are not UTF-8 reach argv.
 */
function runCliRawUid(args: readonly string[], bytes: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PIXIU_')));
  return new Promise((resolve) => {
    execFile('/bin/sh', ['-c', 'exec "$@" "$(printf "$RAW_UID")"', 'sh', process.execPath, ...cliEntry(), ...args],
      { cwd: REPO_ROOT, env: { ...base, ...env, RAW_UID: bytes } },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code) : 0, stdout, stderr }));
  });
}

test('a user id on the command line holding U+FFFD (bytes not UTF-8, or the character itself) exits 1 saying so and pointing at the HTTP API, in token, connect and inspect inbox', async (t) => {
  const env = { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: 'a-configured-secret-of-32-chars-or-more' };
  const notUtf8 = /^pixiu: invalid user id "a\ufffd+": it holds U\+FFFD, which is what the command line shows for bytes that were not UTF-8 .*give the id in UTF-8\. An id that really holds U\+FFFD can only be named through the HTTP API$/m;
  const commands = [['token'], ['connect', '--port', '1'], ['inspect', 'inbox', '--redis-url', 'redis://127.0.0.1:1']];
  // Invalid bytes, an overlong encoding, and U+FFFD itself in UTF-8 (an id the API takes).
  const cases = commands.flatMap((args) => ['a\\377', 'a\\300\\257', 'a\\357\\277\\275'].map((bytes) => [args, bytes] as const));
  for (const [[args, bytes], run] of await runEach(cases, ([args, bytes]) => runCliRawUid(args, bytes, env))) {
    assert.equal(run.code, 1, `${args.join(' ')} ${bytes}: ${run.stderr}`);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, notUtf8, args.join(' '));
  }
  // An id in UTF-8 is taken, non-ASCII too: "café" as its bytes.
  const cafe = await runCliRawUid(['token'], 'caf\\303\\251', env);
  assert.equal(cafe.code, 0, cafe.stderr);
  assert.equal((await createVerifier({ kind: 'secret', secret: env.PIXIU_JWT_SECRET })(cafe.stdout.trim())).user, 'café');
  // The <uid> help of each gives the rule and the way to such an id.
  for (const [args, help] of await runEach([['token'], ['connect'], ['inspect', 'inbox']], (args) => runCli([...args, '--help'], env))) {
    assert.match(help.stdout.replace(/\s+/g, ' '), /no U\+FFFD \(what the command line shows for bytes that were not UTF-8; an id really holding U\+FFFD can only be named through the HTTP API\)/, args.join(' '));
  }
});

test('pixiu token takes --ttl at both ends of 1s to 365d, and the token lives that long', async (t) => {
  const secret = 'a-configured-secret-of-32-chars-or-more';
  const env = { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: secret };
  const verify = createVerifier({ kind: 'secret', secret });
  for (const [[ttl, seconds], run] of await runEach([['1s', 1], ['365d', 365 * 86_400], ['31536000', 365 * 86_400]] as const, ([ttl]) => runCli(['token', 'ann', '--ttl', ttl], env))) {
    assert.equal(run.code, 0, `${ttl}: ${run.stderr}`);
    const payload = JSON.parse(Buffer.from(run.stdout.trim().split('.')[1] ?? '', 'base64url').toString()) as { iat: number; exp: number };
    // exp is read from the clock a moment after iat: a second may have turned between.
    assert.ok(payload.exp - payload.iat === seconds || payload.exp - payload.iat === seconds + 1, `${ttl}: exp - iat = ${payload.exp - payload.iat}`);
    // A 1 s token may already be expired when verified here; the longer ones verify.
    if (seconds > 1) assert.equal((await verify(run.stdout.trim())).user, 'ann', ttl);
  }
});

test('pixiu token refuses tags and channel patterns that could never match, and warns when the token is too big for a refresh frame', async (t) => {
  const env = { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: 'a-configured-secret-of-32-chars-or-more' };
  const cases = [
    ['--tags', 'a b', 'a b'], ['--tags', `ok,${'t'.repeat(65)}`, 't'.repeat(65)],
    ['--channels', 'live.*.chat,bad name', 'bad name'], ['--channels', '**', '**'], ['--channels', 'a..b', 'a..b'], ['--channels', 'live.*x', 'live.*x'],
  ] as const;
  for (const [[flag, value, bad], run] of await runEach(cases, ([flag, value]) => runCli(['token', 'ann', flag, value], env))) {
    assert.equal(run.code, 1, `${flag} ${value}`);
    assert.equal(run.stdout, '');
    assert.ok(run.stderr.includes(`invalid ${flag} entry ${JSON.stringify(bad)}`), run.stderr);
  }
  const fine = await runCli(['token', 'ann', '--tags', 'vip,beta:2', '--channels', 'live.*.chat,*,news'], env);
  assert.equal(fine.code, 0, fine.stderr);
  assert.equal(fine.stderr, '', 'no warning for a small token');
  const many = Array.from({ length: 180 }, (_, i) => `tenant${i}.room.*`).join(',');
  const big = await runCli(['token', 'ann', '--channels', many], env);
  assert.equal(big.code, 0, big.stderr);
  assert.match(big.stdout.trim(), /^[\w-]+\.[\w-]+\.[\w-]+$/, 'the token is still printed');
  assert.match(big.stderr, /warning: a refresh frame carrying this token is \d+ bytes, over the client frame limit of 4096 bytes/);
  // The limit the service is given, from the environment or the flag, is the one checked against.
  const [raisedEnv, raisedFlag, lowered] = await Promise.all([
    runCli(['token', 'ann', '--channels', many], { ...env, PIXIU_MAX_CLIENT_FRAME_BYTES: '65536' }),
    runCli(['token', 'ann', '--channels', many, '--max-client-frame-bytes', '65536'], env),
    // 60 patterns: a refresh frame between 1 KiB and the 4 KiB default.
    runCli(['token', 'ann', '--channels', Array.from({ length: 60 }, (_, i) => `tenant${i}.room.*`).join(',')], { ...env, PIXIU_MAX_CLIENT_FRAME_BYTES: '1024' }),
  ]);
  for (const raised of [raisedEnv, raisedFlag]) {
    assert.equal(raised.code, 0, raised.stderr);
    assert.equal(raised.stderr, '', 'no warning under a raised limit');
  }
  assert.match(lowered.stderr, /over the client frame limit of 1024 bytes/);
  // A token too big for a request's headers: the next test, which checks its whole stderr.
});

test('pixiu token puts a tag or channel pattern given twice in once, and exits 1 for --tags or --channels given with no entry (an empty variable), printing no token', async (t) => {
  const secret = 'a-configured-secret-of-32-chars-or-more';
  const env = { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: secret };
  const twice = await runCli(['token', 'ann', '--tags', 'vip,vip,gold, vip', '--channels', 'live.*,news,live.*'], env);
  assert.equal(twice.code, 0, twice.stderr);
  const claims = await createVerifier({ kind: 'secret', secret })(twice.stdout.trim());
  assert.deepEqual(claims.tags, ['vip', 'gold']);
  assert.deepEqual(claims.channels, ['live.*', 'news']);
  const cases = [['--tags', ''], ['--tags', ','], ['--channels', ''], ['--channels', ' , ']] as const;
  for (const [[flag, value], run] of await runEach(cases, ([flag, value]) => runCli(['token', 'ann', flag, value], env))) {
    assert.equal(run.code, 1, `${flag} ${JSON.stringify(value)}: ${run.stdout}`);
    assert.equal(run.stdout, '');
    assert.ok(run.stderr.includes(`${flag} ${JSON.stringify(value)} lists nothing: give one or more comma-separated entries, or leave ${flag} out`), run.stderr);
  }
});

test('pixiu token warns of a token too big for a request\'s headers alone: no refresh-frame warning that says a connection could use it', async (t) => {
  const env = { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: 'a-configured-secret-of-32-chars-or-more' };
  const huge = await runCli(['token', 'ann', '--channels', Array.from({ length: 700 }, (_, i) => `tenant${i}.room.*`).join(',')], env);
  assert.equal(huge.code, 0, huge.stderr);
  assert.match(huge.stderr, /^pixiu token: warning: this token is \d+ bytes, too big for the service's limit of 16384 bytes on a request's headers: no connect or \/v1\/me request can carry it \(431\); use fewer --channels or --tags\n$/);
});

test('pixiu connect names the option at fault: a bad --host, a bad --tags entry', async (t) => {
  const env = { PIXIU_DATA_DIR: await tempDataDir(t), PIXIU_JWT_SECRET: 'a-configured-secret-of-32-chars-or-more' };
  const [host, empty, tags] = await Promise.all([
    runCli(['connect', 'ann', '--host', 'bad host', '--port', '1'], env),
    runCli(['connect', 'ann', '--host', '', '--port', '1'], env),
    runCli(['connect', 'ann', '--tags', 'a b', '--port', '1'], env),
  ]);
  assert.equal(host.code, 1);
  assert.match(host.stderr, /invalid --host "bad host" \(or PIXIU_HOST\)/);
  assert.doesNotMatch(host.stderr, /--url/);
  // An empty one is refused by the settings' rule, in a client's words.
  assert.equal(empty.code, 1);
  assert.match(empty.stderr, /--host="" is not valid; expected: host of the running service/);
  assert.doesNotMatch(empty.stderr, /listen address/);
  assert.equal(tags.code, 1);
  assert.match(tags.stderr, /invalid --tags entry "a b"/);
});

test('pixiu serve --help exits 0 and lists the settings by environment name', async () => {
  const run = await runCliOnce(['serve', '--help']);
  assert.equal(run.code, 0, run.stderr);
  for (const name of ['PIXIU_PORT', 'PIXIU_REDIS_URL', 'PIXIU_DATA_DIR', 'PIXIU_API_TOKEN']) assert.match(run.stdout, new RegExp(name));
  assert.match(run.stdout, /An empty variable counts as unset/);
});

test('a mistyped subcommand, alone or after help, exits 1 saying it is unknown and naming the nearest; help <subcommand> and --help of each exit 0 with its usage', async () => {
  for (const [args, run] of await runEach([['conect'], ['help', 'conect'], ['help', 'inspekt']], (args) => runCli(args))) {
    assert.equal(run.code, 1, args.join(' '));
    assert.match(run.stderr, new RegExp(`unknown command '${args[args.length - 1]}'`), args.join(' '));
    assert.match(run.stderr, /Did you mean (connect|inspect)\?/, args.join(' '));
  }
  const helps = ['serve', 'token', 'connect', 'inspect', 'redis'].flatMap((name) => [[name, ['help', name]], [name, [name, '--help']]] as const);
  for (const [[name, args], run] of await runEach(helps, ([, args]) => runCliOnce(args))) {
    assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stdout, new RegExp(`^Usage: pixiu ${name} `), args.join(' '));
  }
  const all = await runCli(['--help']);
  assert.equal(all.code, 0, all.stderr);
  for (const name of ['serve', 'token', 'connect', 'inspect', 'redis']) assert.match(all.stdout, new RegExp(`^  ${name} `, 'm'), 'every subcommand in the full help');
});

test('--help after a command that does not exist exits 1 saying it is unknown, as without it, not 0 with the general usage (upgrade tester F4)', async () => {
  for (const [args, run] of await runEach([['claims', '--help'], ['claims', '-h'], ['conect', '--help'], ['claims']], (args) => runCli(args))) {
    assert.equal(run.code, 1, args.join(' '));
    assert.equal(run.stdout, '', `${args.join(' ')}: no usage printed`);
    assert.match(run.stderr, new RegExp(`^error: unknown command '${args[0]}'`), args.join(' '));
    if (args[0] === 'conect') assert.match(run.stderr, /Did you mean connect\?/);
  }
});

/** `pixiu inspect`'s usage and its commands, as commander's help after an unknown subcommand of it lists them. */
const INSPECT_COMMANDS = /^Usage: pixiu inspect [^]*^Commands:\n {2}id [^]*^ {2}inbox [^]*^ {2}cluster /m;

test('an unknown subcommand of inspect (or redis) exits 1 naming it and listing the valid ones, also with --help, -h or after help (pixiu inspect help …, pixiu help inspect …); no hint says to add the --help that was given (verifier F3, reviewer F10)', async () => {
  const cases = [['inspect', 'nosuch', '--help'], ['inspect', 'nosuch', '-h'], ['inspect', 'help', 'nosuch'], ['inspect', 'nosuch'], ['inspect', 'inbx', '--help'],
    ['help', 'inspect', 'nosuch'], ['help', 'inspect', 'help', 'nosuch']];
  for (const [args, run] of await runEach(cases, (args) => runCli(args))) {
    assert.equal(run.code, 1, args.join(' '));
    assert.equal(run.stdout, '', `${args.join(' ')}: no usage printed`);
    assert.match(run.stderr, /^error: unknown subcommand '(nosuch|inbx)' of `pixiu inspect`\n/, args.join(' '));
    assert.match(run.stderr, INSPECT_COMMANDS, args.join(' '));
    assert.doesNotMatch(run.stderr, /add --help/, args.join(' '));
  }
  // Every command with subcommands alike (redisrest F6: `pixiu redis nosuch` was an unknown command, its commands unlisted).
  const redis = await runCli(['redis', 'nosuch']);
  assert.equal(redis.code, 1);
  assert.equal(redis.stdout, '');
  assert.match(redis.stderr, /^error: unknown subcommand 'nosuch' of `pixiu redis`\n[^]*^Usage: pixiu redis [^]*^Commands:\n {2}lost-writes /m);
  assert.match((await runCli(['inspect', 'inbx'])).stderr, /Did you mean inbox\?/);
  for (const [args, run] of await runEach([['nosuchcommand', '--help'], ['nosuchcommand']], (args) => runCli(args))) {
    assert.equal(run.stderr, "error: unknown command 'nosuchcommand'\n(`pixiu --help` lists the commands)\n", args.join(' '));
  }
  // The known ones still print their usage and exit 0.
  for (const [args, run] of await runEach([['inspect', 'help', 'id'], ['inspect', 'id', '--help'], ['help', 'inspect']], (args) => runCliOnce(args))) {
    assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stdout, /^Usage: pixiu inspect /, args.join(' '));
  }
  // help help, at either level, prints the usage and exits 1, as before the walk (reviewer F10).
  for (const [args, run] of await runEach([['help', 'help'], ['inspect', 'help', 'help']], (args) => runCli(args))) {
    assert.equal(run.code, 1, `${args.join(' ')}: ${run.stderr}`);
    assert.match(`${run.stdout}${run.stderr}`, args[0] === 'help' ? /^Usage: pixiu \[options\]/ : /^Usage: pixiu inspect /, args.join(' '));
  }
});

test('the help flag before an unknown command (pixiu --help nosuch, pixiu inspect -h nosuch) exits 1 saying it is unknown, as after it, not 0 with the usage', async () => {
  const cases = [['--help', 'nosuch'], ['-h', 'nosuch'], ['inspect', '-h', 'nosuch'], ['inspect', '--help', 'nosuch'], ['--help', 'inspect', 'nosuch'], ['-h', 'conect']];
  for (const [args, run] of await runEach(cases, (args) => runCli(args))) {
    const inspect = args.includes('inspect');
    assert.equal(run.code, 1, args.join(' '));
    assert.equal(run.stdout, '', `${args.join(' ')}: no usage printed`);
    assert.match(run.stderr, new RegExp(`^error: unknown ${inspect ? 'subcommand' : 'command'} '${args[args.length - 1]}'${inspect ? ' of `pixiu inspect`' : ''}\n`), args.join(' '));
    assert.match(run.stderr, inspect ? INSPECT_COMMANDS : /`pixiu --help` lists the commands/, args.join(' '));
    if (args[1] === 'conect') assert.match(run.stderr, /Did you mean connect\?/);
  }
  // Before a known one the flag still prints the usage, exit 0.
  for (const [args, run] of await runEach([['inspect', '-h', 'id'], ['-h', 'inspect']], (args) => runCli(args))) assert.equal(run.code, 0, args.join(' '));
});

test('pixiu connect --help words --host and --port for a client, not as serve\'s listen address', async () => {
  const run = await runCliOnce(['connect', '--help']);
  assert.equal(run.code, 0, run.stderr);
  const text = run.stdout.replace(/\s+/g, ' ');
  assert.match(text, /--host <value> host of the running service .*\(env PIXIU_HOST\)/);
  assert.match(text, /--port <value> port of the running service, 1 to 65535 \(env PIXIU_PORT\)/);
  assert.doesNotMatch(text, /listen address|any free port/);
});

test('pixiu serve with PIXIU_PORT=abc exits 1 naming PIXIU_PORT', async (t) => {
  const run = await runCli(['serve'], { PIXIU_PORT: 'abc', PIXIU_DATA_DIR: await tempDataDir(t) });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /PIXIU_PORT="abc" is not valid/);
  assert.doesNotMatch(run.stderr, /\bat .*\.[jt]s:\d+/, 'a message, not a stack trace');
});

test('pixiu serve and pixiu token with a bad secret exit 1 naming the setting, and never print the secret', async (t) => {
  const dataDir = await tempDataDir(t);
  const runs: Array<[string[], Record<string, string>, string, RegExp]> = [
    [['serve'], { PIXIU_JWT_SECRET: 'supersecretvalue-too-short' }, 'supersecretvalue-too-short', /PIXIU_JWT_SECRET is not valid: it is 26 characters long, under the minimum of 32/],
    [['serve'], { PIXIU_API_TOKEN: 'near-miss-api-t' }, 'near-miss-api-t', /PIXIU_API_TOKEN is not valid: it is 15 characters long, under the minimum of 16/],
    [['token', 'alice', '--jwt-secret', 'sh0rt-s3cret'], {}, 'sh0rt-s3cret', /--jwt-secret is not valid: it is 12 characters long, under the minimum of 32/],
  ];
  for (const [[args, env, secret, expected], run] of await runEach(runs, ([args, env]) => runCli(args, { PIXIU_DATA_DIR: dataDir, ...env }))) {
    assert.equal(run.code, 1, args.join(' '));
    assert.match(run.stderr, expected);
    assert.ok(!run.stderr.includes(secret) && !run.stdout.includes(secret), `the secret is printed: ${run.stderr}${run.stdout}`);
  }
  assert.deepEqual(await readdir(dataDir), [], 'nothing was started or created');
});

test('pixiu serve --help states the unit of durations, with readable defaults', async () => {
  const run = await runCliOnce(['serve', '--help']);
  assert.equal(run.code, 0, run.stderr);
  const text = run.stdout.replace(/\s+/g, ' ');
  assert.match(text, /--max-connections-per-user <value> open connections allowed per user, across nodes, 1 to 1000 \(env/);
  assert.match(text, /--max-body-bytes <value> largest HTTP request body in bytes \(a batch counts as one body\), 1024 to 268435456 \(256 MiB\); a body is parsed on the event loop, .* \(env PIXIU_MAX_BODY_BYTES\) \[default: 1048576\]/);
  assert.match(text, /--message-ttl <value> default message retention, 1s to 30d; a duration such as 500ms, 30s, 5m, 1h, 7d \(a bare number is milliseconds; a unit in any case but M, refused as minutes or months\) \(env PIXIU_MESSAGE_TTL\) \[default: 7d\]/);
  assert.match(text, /\(env PIXIU_REDELIVERY_BACKOFF\) \[default: 2s,4s,6s\]/);
  // A relative data dir is the cwd's: a start from elsewhere makes a new store there.
  assert.match(text, /--data-dir <value> data root: .*\(a path\) \(env PIXIU_DATA_DIR\) \[default: storage, relative to the current directory\]/);
  // Bounds checked at start are in the help, as the refusal words them, not only in the refusal.
  assert.match(text, /--inbox-cap <value> entries kept per user inbox; older ones are trimmed \(clients see a gap\), from 1 to 10000000 \(env PIXIU_INBOX_CAP\)/);
  // A ping interval at or above the idle timeout is refused at start: the help says so
  // beside the bounds, which alone read as "up to 10m" (walk2 L4).
  assert.match(text, /--heartbeat <value> server ping interval, below --idle-timeout \/ PIXIU_IDLE_TIMEOUT; each also pulls the inbox, from 10ms to 10m; a duration/);
  assert.match(text, /--api-token <value> .*; as a flag it is visible to other users in ps: prefer PIXIU_API_TOKEN \(env PIXIU_API_TOKEN\)/);
  assert.match(text, /--jwt-secret <value> .*; as a flag it is visible to other users in ps: prefer PIXIU_JWT_SECRET \(env PIXIU_JWT_SECRET\)/);
  assert.match(text, /--log-level <value> pino log level \(one of: fatal, error, warn, info, debug, trace, silent\) \(env PIXIU_LOG_LEVEL\)/);
  // The node-to-node read has its own timeout, which the command timeout's words name,
  // where an SRE looking for that timeout reads (an SRE's finding).
  assert.match(text, /--redis-command-timeout <value> how long one Redis command may take .*; also bounds each read of stored messages from another node unless PIXIU_PEER_READ_TIMEOUT is set/);
  assert.match(text, /--peer-read-timeout <value> how long one read of stored messages from another node may take \(POST \/internal\/v1\/records.*unset: PIXIU_REDIS_COMMAND_TIMEOUT.* \(env PIXIU_PEER_READ_TIMEOUT\)/);
});
