/**
 * `pixiu inspect cluster`: the nodes sharing a Redis and key prefix as Redis holds them
 * (DESIGN.md §9; src/cluster/cluster-view.ts): the live nodes with their store, URL,
 * build and last renewal, each store with the node holding its lease, and the MsgID partitions'
 * claims — those of stores no node holds, whose messages cannot be read now, named.
 * Before it, an on-call operator needed `redis-cli` on four keys (an SRE's finding).
 * Read-only, printed as JSON as `inspect inbox` prints; errors as every inspect
 * command's (inspect-redis.ts): one line on stderr, exit 1, nothing on stdout.
 */
import { Command } from 'commander';
import { Keys } from '../redis/keys.js';
import { addConfigOptions, configFromOptions } from './config-options.js';
import { READ_KEYS, READ_URL_DOC, checkPrefixUsed, connectToRead } from './inspect-redis.js';

/** The words after the options in `inspect cluster --help`: what it prints, and its exit status. */
const HELP_AFTER = `
Prints JSON (read-only: it reads the node registry and settings, the store claims and leases, the inbox generation, and writes nothing):
  redis_time      Redis's time when read, ms since the epoch; the *_ms_ago / *_in_ms fields count from it
  nodes           the live nodes: node (its id), store and url (from the store lease naming it; null while
                  it starts or stops), host, pid, version and commit (the build it runs, as pixiu --version
                  prints it; null for a release too old to say), renewed_ms_ago (renewed every 5 s),
                  expires_in_ms (lapses 15 s after its last renewal)
  lapsed_nodes    registrations past their expiry not yet removed: a node killed, hung or cut off moments ago
  stores          each data dir's store: store, dir (its store folder, the data dir's xiu, absolute, as it
                  last started) and host (where it last started), partitions (how many)
                  and blocks ("8..15"), holder: {node, url, registered, lease_expires_in_ms}, or null when no
                  node holds its lease (stopped: its messages cannot be read until it is back)
  partitions      total (256), claimed, free, retired and without_holder (runs of partitions whose store
                  no node holds)
  inbox_generation  set (false: never raised), value (0 when not set; null when unreadable: set by hand) and
                  raised_ms_ago: raised by pixiu redis lost-writes or by a node that saw Redis lose writes;
                  each node reads it at start and every 5 s (after a raise, every inbox gets a new epoch at its next append)

Exit status: 0 when the cluster is printed (no live node included: every node stopped);
1 with a message on stderr and nothing on stdout otherwise: a bad option, no Redis to read or
Redis not answering, a Redis in cluster mode (not supported, as serve refuses it), or a key prefix no Pixiu service has used on that Redis (a wrong PIXIU_REDIS_PREFIX).`;

/** Builds `inspect cluster`. */
export function clusterCommand(): Command {
  const cmd = new Command('cluster')
    .description('list the live nodes (id, URL, build, last renewal), the stores with the node holding each one\'s lease, the partitions\' claims and the inbox generation')
    .addHelpText('after', HELP_AFTER);
  addConfigOptions(cmd, READ_KEYS, { redisUrl: READ_URL_DOC });
  cmd.action(async () => {
    const config = configFromOptions(cmd, READ_KEYS);
    const redis = await connectToRead(config);
    try {
      // Loaded here, not with the module: `--help` and a refused option start without it.
      const { readClusterView } = await import('../cluster/cluster-view.js');
      const view = await readClusterView(redis, new Keys(config.redisPrefix));
      if (view.nodes.length === 0 && view.lapsed_nodes.length === 0 && view.stores.length === 0 && view.partitions.claimed === 0) {
        await checkPrefixUsed(redis, config.redisPrefix);
      }
      process.stdout.write(`${JSON.stringify(view, null, 2)}\n`);
    } finally {
      redis.disconnect();
    }
  });
  return cmd;
}
