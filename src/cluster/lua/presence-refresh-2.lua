--[[
presence-refresh-2: extend one connection's presence entry (DESIGN.md §4 `conns`),
on each server heartbeat of that connection; re-add it, within the rules a new
connection meets, when it was lost.

Why the rules on a re-add: an entry is lost when Redis lost presence (restarted empty,
FLUSHALL) or it lapsed in a long pause of its node. Meanwhile the user may have
connected again: the same device (which replaces the old connection, DESIGN.md §6) or
other devices up to the per-user limit. Re-adding the lost entry unconditionally (as
presence-refresh-1 did) left two live connections of one device, or more than the
limit, for good.

Steps
  1. If the entry exists: write it with its new expiry. Reply 1.
  2. Else (re-add): walk the user's entries, dropping those past their expiry. If
     another entry is of the same device, it is newer than this connection (written
     while this one's entry was lost): reply -1, write nothing (the caller closes this
     connection 4002). If the live entries reach the limit: reply -2, write nothing
     (the caller closes it). Else write the entry. Reply 0.
  3. Make sure the hash lives at least as long as the entry.

KEYS
  1. conns hash `<prefix>{uid}:conns`

ARGV
  1. conn id
  2. entry value, `<expiresAtMs>|<node>|<device>|<sinceMs>`
  3. the entry's lifetime, ms
  4. now, ms since the Unix epoch
  5. the limit: most live connections per user, a positive integer

Returns
  1 when the entry existed, 0 when it was re-added, -1 when a newer connection of the
  same device holds its place, -2 when the user is at the limit without it.

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local connsKey = KEYS[1]
local conn, value, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
if conn == '' or not ttl or ttl < 1 or not now or not limit or limit < 1 then
  return redis.error_reply('INVALID_REQUEST conn, ttl, now and limit must be given')
end
local device = string.match(value, '^%d+|[^|]+|([^|]+)|%d+$')
if not device then
  return redis.error_reply('INVALID_REQUEST entry must be <expiresAt>|<node>|<device>|<since>')
end
local reply = 1
if redis.call('HEXISTS', connsKey, conn) == 0 then
  local entries = redis.call('HGETALL', connsKey)
  local live = 0
  for i = 1, #entries, 2 do
    local id, entry = entries[i], entries[i + 1]
    local expires, dev = string.match(entry, '^(%d+)|[^|]+|([^|]+)|')
    if not expires or tonumber(expires) <= now then
      redis.call('HDEL', connsKey, id)
    elseif dev == device then
      return -1
    else
      live = live + 1
    end
  end
  if live >= limit then
    return -2
  end
  reply = 0
end
redis.call('HSET', connsKey, conn, value)
if redis.call('PTTL', connsKey) < ttl then
  redis.call('PEXPIRE', connsKey, ttl)
end
return reply
