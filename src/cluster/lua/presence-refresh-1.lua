--[[
presence-refresh-1: extend one connection's presence entry (DESIGN.md §4 `conns`),
on each server heartbeat of that connection.

Steps
  1. Write the entry with its new expiry (re-adding it if it was pruned meanwhile,
     e.g. after a long pause of the node's event loop: the connection is alive).
  2. Make sure the hash lives at least as long as the entry.

KEYS
  1. conns hash `<prefix>{uid}:conns`

ARGV
  1. conn id
  2. entry value, `<expiresAtMs>|<node>|<device>|<sinceMs>`
  3. the entry's lifetime, ms

Returns
  1 when the entry existed, 0 when it was re-added.

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local connsKey = KEYS[1]
local conn, value, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if conn == '' or not ttl or ttl < 1 or not string.match(value, '^%d+|[^|]+|[^|]+|%d+$') then
  return redis.error_reply('INVALID_REQUEST conn, entry and ttl must be given')
end
local existed = redis.call('HSET', connsKey, conn, value) == 0 and 1 or 0
if redis.call('PTTL', connsKey) < ttl then
  redis.call('PEXPIRE', connsKey, ttl)
end
return existed
