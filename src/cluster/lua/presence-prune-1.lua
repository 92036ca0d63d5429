#!lua flags=allow-oom
--[[
presence-prune-1: delete presence entries judged dead (expired, or of a node that is
gone) only while they are still what was judged (src/cluster/presence.ts). The entries
are read, their nodes' liveness is looked up, then they are deleted: an entry
refreshed in between (its connection's heartbeat, its node registered again) must be
kept — deleted, the user's notifies stopped reaching that node until its next refresh
(a fresh review's finding).

Flags (the #!lua line, Redis 7 script flags)
  allow-oom: it only deletes (HDEL), which frees memory, so it runs while Redis is
  over maxmemory too (docs/decisions.md, "maxmemory").

KEYS
  1. conns hash `<prefix>{uid}:conns`

ARGV
  pairs: conn id, the entry value as read (`<expiresAtMs>|<node>|<device>|<sinceMs>`)

Returns
  the number of entries deleted.
]]
local deleted = 0
for i = 1, #ARGV - 1, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    deleted = deleted + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return deleted
