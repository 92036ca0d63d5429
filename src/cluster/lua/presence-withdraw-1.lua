#!lua
--[[
presence-withdraw-1: take back a new connection's entry that replaced the same
device's older connections (presence-add-2), and write those back, because the new
connection's client turned out to have left before the replacement took effect
(src/gateway/abandoned-handshakes.ts: its FIN or RST came while presence-add-2 ran). The older
connections were not closed; with their entries back, notifies reach their nodes again
and presence lists them, as if the handshake had never come (DESIGN.md §4 `conns`, §6).

Steps
  1. Delete the new connection's entry (ARGV[1]).
  2. If a live entry of the same device (ARGV[2]) is left, a newer handshake of that
     device was admitted meanwhile: it is the device's connection now, and the older
     ones are not written back. Return 0 (the caller closes them 4002, as that newer
     handshake would have had they still been listed).
  3. Else write back each older entry (ARGV[5..], conn and value as presence-add-2
     returned them) that has not expired, and make sure the hash lives at least as
     long as an entry (ARGV[4]; the delete in step 1 may have removed the hash).
     Return 1. (Nothing else wrote those entries meanwhile: a refresh of an older
     connection while the new entry was there answered `replaced`, writing nothing.)
  The per-user limit is not checked in step 3: those connections held their places
  until presence-add-2 removed them, one round trip ago.

Flags (the #!lua line, Redis 7 script flags)
  none: it grows Redis (HSET), so it is refused whole, before it runs, while Redis is
  over maxmemory (docs/decisions.md, "maxmemory"); the caller then closes the older
  connections 4002, as before this script existed.

KEYS
  1. conns hash `<prefix>{uid}:conns`: conn id → `<expiresAtMs>|<node>|<device>|<sinceMs>`

ARGV
  1. conn id of the new connection, whose entry goes
  2. its device
  3. now, ms since the Unix epoch
  4. an entry's lifetime, ms (for the hash's own expiry)
  5.. pairs: conn id of an older connection, its entry value as presence-add-2 returned it

Returns
  1: the older entries were written back (those not expired); 0: a newer entry of the
  device holds the place, nothing was written back.

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local connsKey = KEYS[1]
local conn, device = ARGV[1], ARGV[2]
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])

if not now or not ttl or ttl < 1 or conn == '' or device == '' or #ARGV % 2 ~= 0 then
  return redis.error_reply('INVALID_REQUEST now and ttl must be positive numbers, conn and device non-empty, older entries in pairs')
end

redis.call('HDEL', connsKey, conn)

local entries = redis.call('HGETALL', connsKey)
for i = 1, #entries, 2 do
  local expires, dev = string.match(entries[i + 1], '^(%d+)|[^|]+|([^|]+)|')
  if expires and tonumber(expires) > now and dev == device then
    return 0
  end
end

for i = 5, #ARGV - 1, 2 do
  local expires = string.match(ARGV[i + 1], '^(%d+)|[^|]+|[^|]+|%d+$')
  if expires and tonumber(expires) > now then
    redis.call('HSET', connsKey, ARGV[i], ARGV[i + 1])
  end
end
if redis.call('EXISTS', connsKey) == 1 and redis.call('PTTL', connsKey) < ttl then
  redis.call('PEXPIRE', connsKey, ttl)
end
return 1
