#!lua
--[[
presence-close-1: remove the presence entries of connections `DELETE
/v1/users/{uid}/connections` closed, and mark each as closed by it (DESIGN.md §4
`conns`; docs/api.md "Presence"), in one step.

Why the mark: the DELETE kicks each connection's node over Pub/Sub, and a kick its
node's subscriber never reads is lost although Redis counted a subscriber (a link
that drops what it holds and is then reset, the network-fault tester's kick2: the
subscriber was half-open). That node then took the missing entry for one Redis lost
and wrote it back at its next refresh, and the connection stayed open for good,
listed online again. A replaced connection (4002) was closed then, because a newer
entry of its device stood in its place; a closed one leaves no entry, so this mark
stands in its place: presence-refresh-4 finds it and answers the close instead of
writing the entry back.

Steps
  1. Delete the marks past their time (ARGV[2]: they are kept until then only).
  2. For each connection (ARGV[5..]): delete its entry from conns, and set its mark,
     `<untilMs>|<code>|<reason>`, in closed.
  3. Make sure the closed hash lives at least until the marks just set
     (PEXPIRE, only ever longer).

Flags (the #!lua line, Redis 7 script flags)
  none: it grows Redis (HSET), so it is refused whole, before it runs, while Redis is
  over maxmemory (docs/decisions.md, "maxmemory"); the caller then removes the entries
  unmarked (HDEL, which Redis takes while full), as before this script existed.

KEYS
  1. conns hash `<prefix>{uid}:conns`: conn id → `<expiresAtMs>|<node>|<device>|<sinceMs>`
  2. closed hash `<prefix>{uid}:closed`: conn id → `<untilMs>|<code>|<reason>`

ARGV
  1. until when the marks are kept, ms since the Unix epoch (Redis's clock, as the
     registry reads it: the `now` presence-refresh-4 is given)
  2. now, ms since the Unix epoch (same clock)
  3. the close code the connections are closed with, an integer 1000–4999
  4. the close reason (any text; `|` allowed: it is the last field)
  5.. the conn ids

Returns
  the number of entries deleted from conns.

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local connsKey, closedKey = KEYS[1], KEYS[2]
local untilMs, now, code, reason = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
if not string.match(ARGV[1], '^%d+$') or not now or untilMs <= now
    or not string.match(ARGV[3], '^%d+$') or code < 1000 or code > 4999 then
  return redis.error_reply('INVALID_REQUEST until must be an integer after now; code an integer 1000-4999')
end

local marks = redis.call('HGETALL', closedKey)
for i = 1, #marks, 2 do
  local markUntil = tonumber(string.match(marks[i + 1], '^(%d+)|'))
  if not markUntil or markUntil <= now then
    redis.call('HDEL', closedKey, marks[i])
  end
end

local mark = ARGV[1] .. '|' .. ARGV[3] .. '|' .. reason
local deleted = 0
for i = 5, #ARGV do
  deleted = deleted + redis.call('HDEL', connsKey, ARGV[i])
  redis.call('HSET', closedKey, ARGV[i], mark)
end
if #ARGV >= 5 and redis.call('PTTL', closedKey) < untilMs - now then
  redis.call('PEXPIRE', closedKey, untilMs - now)
end
return deleted
