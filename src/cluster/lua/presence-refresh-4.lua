#!lua
--[[
presence-refresh-4: extend one connection's presence entry (DESIGN.md §4 `conns`),
on each server heartbeat of that connection; re-add it, within the rules a new
connection meets, when it was lost; unless `DELETE /v1/users/{uid}/connections`
closed the connection.

Why the rules on a re-add: an entry is lost when Redis lost presence (restarted empty,
FLUSHALL) or it lapsed in a long pause of its node. Meanwhile the user may have
connected again: the same device (which replaces the old connection, DESIGN.md §6) or
other devices up to the per-user limit. Re-adding the lost entry unconditionally (as
presence-refresh-1 did) left two live connections of one device, or more than the
limit, for good.

Why this node's connections are named (new in -3): Redis may come back with older
data (an AOF restored from a copy, a failover to a replica that was behind), holding
entries of connections of this node that have closed since. As presence-refresh-2
read them, such an entry of the same device was "a newer connection": the live
connection was closed 4002 with no newer connection anywhere (the chaos tester's F1).
An entry naming this node whose connection this node does not hold is stale: it is
dropped. Entries of other nodes keep the rule above (this node cannot know which of
their connections are open). Node ids are per process (`<host>-<pid>-<random>`), so
an entry of an earlier process on this host is another node's.

Why the closed mark is read (new in -4): the DELETE removes the entry and kicks the
connection's node over Pub/Sub. A kick that node never reads is lost although Redis
counted its subscriber (its link to Redis dropped what it held, then was reset: the
network-fault tester's kick2), and the node took the missing entry for one Redis lost
and wrote it back: the connection stayed open for good, listed online again. The
DELETE marks each connection it closed (presence-close-1); here the mark answers the
close, with the DELETE's code and reason, as a newer entry of the device answers a
replaced connection (-1). Read at every refresh, not only on a re-add: an entry
written back by another path after the DELETE (presence-withdraw-1 writing back a
replaced entry, an older copy of the data) is not kept either.

Steps
  0. If the connection has a closed mark (KEYS[2]) not past its time: delete its
     entry if there is one, write nothing else, reply {code, reason}.
  1. If the entry exists: write it with its new expiry. Reply 1.
  2. Else (re-add): walk the user's entries, dropping those past their expiry and
     those of this node (ARGV[6]) whose connection is not in ARGV[7..] (stale). If
     another entry is of the same device, it is newer than this connection (written
     while this one's entry was lost): reply -1, write nothing (the caller closes this
     connection 4002). If the live entries reach the limit: reply -2, write nothing
     (the caller closes it). Else write the entry. Reply 0.
  3. Make sure the hash lives at least as long as the entry.

Flags (the #!lua line, Redis 7 script flags)
  none: it writes (HSET, HDEL, PEXPIRE), so it is refused whole, before it runs, while
  Redis is over maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. conns hash `<prefix>{uid}:conns`
  2. closed hash `<prefix>{uid}:closed`: conn id → `<untilMs>|<code>|<reason>` (presence-close-1)

ARGV
  1. conn id
  2. entry value, `<expiresAtMs>|<node>|<device>|<sinceMs>`
  3. the entry's lifetime, ms
  4. now, ms since the Unix epoch (Redis's clock as the registry reads it: marks are
     timed by it)
  5. the limit: most live connections per user, a positive integer
  6. this node's id
  7.. the user's connections this node holds (ARGV[1] among them, or not: it is kept either way)

Returns
  1 when the entry existed, 0 when it was re-added, -1 when a newer connection of the
  same device holds its place, -2 when the user is at the limit without it;
  {code, reason} (an array: the close code as an integer, the reason) when a DELETE
  closed the connection.

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local connsKey, closedKey = KEYS[1], KEYS[2]
local conn, value, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now, limit, self = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
if conn == '' or not ttl or ttl < 1 or not now or not limit or limit < 1 or not self or self == '' then
  return redis.error_reply('INVALID_REQUEST conn, ttl, now, limit and node must be given')
end
local device = string.match(value, '^%d+|[^|]+|([^|]+)|%d+$')
if not device then
  return redis.error_reply('INVALID_REQUEST entry must be <expiresAt>|<node>|<device>|<since>')
end
local mark = redis.call('HGET', closedKey, conn)
if mark then
  local markUntil, code, reason = string.match(mark, '^(%d+)|(%d+)|(.*)$')
  if markUntil and tonumber(markUntil) > now then
    redis.call('HDEL', connsKey, conn)
    return {tonumber(code), reason}
  end
end
local reply = 1
if redis.call('HEXISTS', connsKey, conn) == 0 then
  local held = {}
  for i = 7, #ARGV do
    held[ARGV[i]] = true
  end
  local entries = redis.call('HGETALL', connsKey)
  local live = 0
  for i = 1, #entries, 2 do
    local id, entry = entries[i], entries[i + 1]
    local expires, node, dev = string.match(entry, '^(%d+)|([^|]+)|([^|]+)|')
    if not expires or tonumber(expires) <= now or (node == self and not held[id]) then
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
