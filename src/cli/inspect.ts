/**
 * `pixiu inspect …`: ops commands that read Pixiu's state without the service's help.
 *
 * - `inspect id <msgid>`: decode a MsgID (partition, kind, counter) and, when Redis can
 *   be read, name the store holding its partition and where its node listens.
 * - `inspect inbox <uid> [--after-seq n] [--limit n]`: a user's inbox bounds, entries and ack cursors
 *   (with those an epoch change kept of the old epoch, src/inbox/kept-cursors.ts).
 * - `inspect cluster`: the live nodes, the stores with the node holding each one's
 *   lease, and the partitions' claims (inspect-cluster.ts).
 *
 * Redis is the configured `PIXIU_REDIS_URL`, or the embedded one of the data dir when
 * a `pixiu serve` is running on it. (The message store is locked by a running service;
 * read content with `GET /v1/messages/{id}`.)
 */
import { Command } from 'commander';
import { decodeMsgId, kindName } from '../ids/msg-id.js';
import { Keys } from '../redis/keys.js';
import { StartupError } from '../errors.js';
import { isPlainInteger } from '../api/plain-integer.js';
import { CLI_USER_ID_RULE, addConfigOptions, checkUserId, configFromOptions } from './config-options.js';
import { redactUrl, unixUrl } from '../redis/url.js';
import { READ_KEYS, READ_URL_DOC, checkPrefixUsed, connectToRead, embeddedRedisSocket } from './inspect-redis.js';
import { clusterCommand } from './inspect-cluster.js';

/**
 * The settings `inspect inbox` takes. Not `inboxCap`: the cap acts only when an append
 * trims an inbox, and inspect only reads, so `--inbox-cap` changed nothing while its
 * help (the serve setting's, "older ones are trimmed") suggested it might write (a
 * black-box SRE's finding); it is an unknown option now, and `PIXIU_INBOX_CAP` is not read.
 */
const KEYS = READ_KEYS;

/**
 * A numeric option, held to the API's rule for integers in a query (decimal digits
 * only: `0x2`, `1e3` and an empty value are refused, not read as 2, 1000 and 0).
 * @throws StartupError naming the option and its range
 */
function intOption(text: string | undefined, name: string, min: number, max: number, def: number): number {
  if (text === undefined) return def;
  const n = Number(text);
  if (!isPlainInteger(text) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new StartupError(`${name} must be an integer from ${min} to ${max} written in decimal digits, got ${JSON.stringify(text)}`);
  }
  return n;
}

/** Which store holds a partition, and where its node listens (`inspect id`). */
interface PartitionHolder {
  readonly store: string;
  /** The node's advertised URL; null when the store has no lease (its node is not running). */
  readonly url: string | null;
  readonly node?: string;
}

/**
 * The holder of `partition` on the Redis at `url` (read-only: the claims hash and the
 * store's lease, src/cluster/partition-claims.ts); null when no store claims it.
 * @throws Error when Redis cannot be read; StartupError when it runs in cluster mode
 *   (version-check.ts `refuseClusterMode`, as serve refuses it)
 */
async function partitionHolder(url: string, config: { redisPrefix: string; redisCommandTimeoutMs: number }, partition: number): Promise<PartitionHolder | null> {
  // Loaded here, not at start-up: help and argument errors start without ioredis.
  const [{ createRedis }, { PartitionClaims }, { RETIRED_STORE }, { refuseClusterMode }] = await Promise.all([
    import('../redis/client.js'), import('../cluster/partition-claims.js'), import('../cluster/store-directory.js'), import('../redis/version-check.js'),
  ]);
  const redis = await createRedis({ url, commandTimeoutMs: config.redisCommandTimeoutMs, name: 'pixiu:inspect' });
  try {
    await refuseClusterMode(redis, redactUrl(url));
    const claims = new PartitionClaims(redis, new Keys(config.redisPrefix));
    const store = await claims.ownerOf(partition);
    if (store === null) return null;
    if (store === RETIRED_STORE) return { store, url: null };
    const lease = await claims.leaseOf(store);
    return lease === undefined ? { store, url: null } : { store, url: lease.url, node: lease.node };
  } finally {
    redis.disconnect();
  }
}

/** Builds the `inspect` subcommand and its children. */
export function inspectCommand(): Command {
  const inspect = new Command('inspect').description('read Pixiu state for operations (ids, inboxes, the cluster)');

  const idCmd = inspect.command('id')
    .description('decode a MsgID: partition, kind and counter; with a Redis to read, the store holding its partition (holder)')
    .argument('<msgid>', '16 hex digits')
    .addHelpText('after', '\nholder (only when Redis is read: PIXIU_REDIS_URL, or the embedded Redis of a serve on the data dir):\n'
      + '{"store": id, "url": where its node listens, "node": its id} — url null when the store\'s node is not running\n'
      + '(no lease); store "retired" for retired partitions; holder null when no store claims the partition.\n'
      + 'Redis named but not answering, an embedded one this user may not reach, or a Redis in cluster mode\n'
      + '(not supported, as serve refuses it): the decoded id alone, and a note on stderr.');
  addConfigOptions(idCmd, KEYS, { redisUrl: 'Redis to read the partition\'s holder from; unset: the embedded Redis of a `pixiu serve` running on the data dir, else none' });
  idCmd.action(async (id: string) => {
    let parts;
    try {
      parts = decodeMsgId(id);
    } catch (err) {
      throw new StartupError((err as Error).message);
    }
    const decoded = { id, partition: parts.partition, kind: kindName(parts.kind), counter: parts.counter };
    const config = configFromOptions(idCmd, KEYS);
    let url = config.redisUrl;
    if (url === undefined) {
      // A serve's embedded Redis this user may not reach (its folder is private): said, as a Redis not answering is.
      const sock = await embeddedRedisSocket(config.dataDir).catch((err: unknown) => {
        process.stderr.write(`the partition's holder is not shown: ${(err as Error).message}\n`);
        return undefined;
      });
      if (sock !== undefined) url = unixUrl(sock);
    }
    let holder: PartitionHolder | null | undefined;
    if (url !== undefined) {
      holder = await partitionHolder(url, config, parts.partition).catch((err: unknown) => {
        // A Redis in cluster mode was read: refused in serve's words, not "could not be read".
        const why = err instanceof StartupError ? err.message : `Redis could not be read (${(err as Error).message})`;
        process.stderr.write(`the partition's holder is not shown: ${why}\n`);
        return undefined;
      });
    }
    process.stdout.write(`${JSON.stringify(holder === undefined ? decoded : { ...decoded, holder })}\n`);
  });

  const inboxCmd = inspect.command('inbox')
    .description('print a user\'s inbox: epoch, first and latest seq, when its keys expire, entries after --after-seq, ack cursors (and those kept of an older epoch)')
    .argument('<uid>', `the user id: ${CLI_USER_ID_RULE}`)
    .option('--after-seq <n>', 'list entries after this seq', '0')
    .option('--limit <n>', 'most entries to list (1-10000)', '20')
    .addHelpText('after', '\nExit status: 0 when the inbox is printed (an empty one included: a user with no messages yet);\n'
      + '1 with a message on stderr and nothing on stdout otherwise: a bad option, no Redis to read, a Redis in\n'
      + 'cluster mode (not supported, as serve refuses it), or a key\n'
      + 'prefix no Pixiu service has used on that Redis (a wrong PIXIU_REDIS_PREFIX).');
  // inspect reads a running service's Redis; it never starts one.
  addConfigOptions(inboxCmd, KEYS, { redisUrl: READ_URL_DOC });
  inboxCmd.action(async (uid: string) => {
    checkUserId(uid);
    const config = configFromOptions(inboxCmd, KEYS);
    const opts = inboxCmd.opts<{ afterSeq: string; limit: string }>();
    const after = intOption(opts.afterSeq, '--after-seq', 0, Number.MAX_SAFE_INTEGER, 0);
    const limit = intOption(opts.limit, '--limit', 1, 10_000, 20);
    const redis = await connectToRead(config);
    try {
      // Loaded here, not with the module: `inspect id`, `--help` and a refused option
      // start without ioredis and the inbox (a few hundred ms of CPU).
      const [{ Inbox }, { readKeptCursors }] = await Promise.all([import('../inbox/inbox.js'), import('../inbox/kept-cursors.js')]);
      // The cap is the Inbox's for appends, which inspect never makes: any valid one reads alike.
      const inbox = new Inbox(redis, { prefix: config.redisPrefix, cap: config.inboxCap });
      const [page, cursors, keptCursors, expiresAt] = await Promise.all([
        inbox.range(uid, after, limit), inbox.cursors(uid), readKeptCursors(redis, config.redisPrefix, uid), inbox.expiresAt(uid),
      ]);
      // Named as the API names them (GET /v1/users/{uid}/messages, GET /v1/messages/{id}).
      // An entry that is not what the append script writes: its seq, marked (docs/decisions.md "Malformed inbox entries").
      const entries = page.entries.map((e) => e.malformed === true
        ? { seq: e.seq, malformed: true }
        : { seq: e.seq, id: e.id, kind: kindName(e.kind), ...(e.room !== undefined ? { room: e.room } : {}), ...(e.exp !== undefined ? { exp: e.exp } : {}) });
      // expires_at: when the inbox's keys go (retention), ms; null: they do not.
      // kept_cursors: those a new epoch kept of an older one, until the device acks in this
      // one (docs/decisions.md "Stored cursors across a new epoch").
      const shown = {
        user: uid, epoch: page.epoch, first_seq: page.firstSeq, latest_seq: page.latestSeq, expires_at: expiresAt, entries, cursors, kept_cursors: keptCursors,
      };
      // An inbox that was never created reads the same as a key prefix no service uses
      // (a wrong --redis-prefix): every service writes `<prefix>cluster:secret` at start.
      // The second is an error (exit 1, nothing on stdout), so a script can tell it
      // from an empty inbox.
      if (page.epoch === null) await checkPrefixUsed(redis, config.redisPrefix);
      process.stdout.write(`${JSON.stringify(shown, null, 2)}\n`);
    } finally {
      redis.disconnect();
    }
  });
  inspect.addCommand(clusterCommand());
  return inspect;
}
