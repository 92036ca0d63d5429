/**
 * `pixiu redis …`: what an operator tells Pixiu about the Redis it runs on.
 *
 * - `redis lost-writes`: Redis went back in time — an unplanned failover to a replica
 *   that was behind, a restore of an older snapshot — so raise the inbox generation
 *   (src/inbox/generation.ts): every inbox gets a new epoch at its next append, and a
 *   device resuming under the old epoch is sent `reset` instead of being welcomed past
 *   seqs assigned again (README "Redis failover"; docs/decisions.md "The inbox
 *   generation").
 *
 * Redis is the configured `PIXIU_REDIS_URL`, or the embedded one of the data dir: the
 * one running there (a serving node's, or one left running by a node killed outright),
 * or with none running (a restore, before the restored data dir's first start) one
 * started for the command and stopped again (redis-to-write.ts). Every failure is one
 * line on stderr and exit 1 (and a failed close after it, one more line).
 */
import { Command } from 'commander';
import { StartupError } from '../errors.js';
import { Keys } from '../redis/keys.js';
import { addConfigOptions, configFromOptions } from './config-options.js';
import { READ_KEYS, checkPrefixUsed } from './inspect-redis.js';
import { connectToWrite, withRedisToWrite } from './redis-to-write.js';

/** The words after the options in `redis lost-writes --help`: when to run it, what it does, its exit status. */
const LOST_WRITES_HELP = `
Run it after Redis went back in time under Pixiu, before the nodes are repointed or
restarted: an unplanned failover to a replica that was behind (REPLICAOF NO ONE on a
replica while the old primary still took writes, or after it died), a restore of an
older snapshot (a restored data dir with the embedded Redis too: run it with the
restored node still stopped, on its PIXIU_DATA_DIR, then start the node), or a restart
from an RDB snapshot without AOF. Run it every time, also
when the nodes kept running behind an address that follows the primary: they raise it
by themselves only when the loss took one of their own lease renewals or claims,
which most such losses do not. Run it against the Redis the nodes will use (the
promoted replica). Without PIXIU_REDIS_URL it uses the embedded Redis of the data dir:
the one running there (the serving node's, or one a node killed outright left running,
which the node started next takes over), or, none running, one it starts there (as
serve does) and stops again. Not needed after a planned FAILOVER (Redis 6.2+: the replica has
caught up before it takes over) or a Redis restart with its AOF intact: nothing was lost.

What it does: raises the inbox generation (the key <prefix>inbox-generation). Running
nodes read it within 5 s, starting ones at start. Every user's inbox then gets a new
epoch at its next append, so the seqs Redis lost, assigned again to new messages, are
never read against a device's last_seq of the old epoch: each device of such a user is
sent a reset and its retained inbox again (clients match messages by id, docs/protocol.md).
That costs one reset per user with a new message, which is why it is not done on every start.

Exit status: 0 when the generation was raised (the line says from what to what);
1 with a message on stderr otherwise: a bad option, no Redis or Redis not answering
(without PIXIU_REDIS_URL: no embedded Redis data in the data dir, or a node starting
on it: run it again once the node serves),
a Redis in cluster mode (not supported, as serve refuses it), a replica (run it on the
primary), or a key prefix no Pixiu service has used on that
Redis (a wrong PIXIU_REDIS_PREFIX).`;

/** Builds the `redis` subcommand and its children. */
export function redisCommand(): Command {
  const redisCmd = new Command('redis').description('tell Pixiu what happened to its Redis (lost-writes: after an unplanned failover or a restore)');

  const lost = redisCmd.command('lost-writes')
    .description('after Redis lost acknowledged writes (failover to a replica behind, restore of a snapshot): give every inbox a new epoch at its next append, so devices are sent a reset, not welcomed past reused seqs')
    .addHelpText('after', LOST_WRITES_HELP);
  addConfigOptions(lost, READ_KEYS, {
    redisUrl: 'the Redis the nodes use (after a failover: the promoted replica), redis://, rediss:// or unix:// URL; unset: the embedded Redis of the data dir (its running node\'s, or, the node stopped, one started for the command)',
  });
  lost.action(async () => {
    const config = configFromOptions(lost, READ_KEYS);
    const target = await connectToWrite(config);
    // A redis-server started for the command has written its AOF once this returns.
    const said = await withRedisToWrite(target, async (redis) => {
      const role = await redis.call('ROLE') as unknown[];
      if (role[0] !== 'master') {
        throw new StartupError(`this Redis is a replica (role ${String(role[0])}): run pixiu redis lost-writes against the primary the nodes will use (after REPLICAOF NO ONE on the promoted replica)`);
      }
      await checkPrefixUsed(redis, config.redisPrefix);
      // Loaded here, not with the module: `--help` and a refused option start without it.
      const { raiseGeneration } = await import('../inbox/generation.js');
      const { before, after } = await raiseGeneration(redis, new Keys(config.redisPrefix)).catch((err: Error) => {
        throw new StartupError(`could not raise the inbox generation: ${err.message}`, { cause: err });
      });
      return `inbox generation raised from ${before} to ${after} on ${target.where}, key prefix ${JSON.stringify(config.redisPrefix)}: `
        + 'every inbox gets a new epoch at its next append (running nodes read it within 5 s, starting ones at start); '
        + `devices resuming under an old epoch are sent a reset. ${target.next}\n`;
    });
    process.stdout.write(said);
  });
  return redisCmd;
}
