#!lua
--[[
presence-add-2: record one new connection of a user, within the per-user connection
limit, replacing the same device's older connections (DESIGN.md §4 `conns`, §6), and
record what it replaced, for the node to find should this script's reply not reach it.

Why the record (new in -2): the node closes the connections an add replaced (4002) on
the add's reply. When Redis ran the add but its reply did not reach the node within
its command timeout (Redis stalled, a slow or lost link), the handshake was answered
503 and nothing closed them: they stayed open off presence, beside the device's next
connection, until their own refresh found their place taken (up to PIXIU_HEARTBEAT),
and the handshake's entry stayed as an orphan until it expired. The node now settles
such an add once Redis answers (presence-settle-2: it deletes the entry and reads this
record), and kicks what it replaced (docs/decisions.md, "A presence add whose reply is
lost").

Steps
  1. Walk the user's presence entries. Those past their expiry are to be dropped (each
     entry expires on its own). Entries of the same device are to be replaced; the
     others count against the limit.
  2. If the counted entries reach ARGV[5], refuse: drop the expired entries, return
     {0}. Nothing else changes.
  3. If any is to be replaced, read KEYS[2]'s records — before anything is written, so
     that a KEYS[2] of another type (an operator's SET, another program under the
     prefix) fails the script with Redis's WRONGTYPE having written nothing: before, the
     add had replaced the entries and written its own when it failed, and was answered
     503 "retry later" for ever (review-presence F3).
  4. Drop the expired entries, delete the same-device entries, write the new one, and
     make sure the hash lives at least as long as the new entry (PTTL only ever grows
     here, so an entry refreshed later is never cut short).
  5. If it replaced any, delete the records of KEYS[2] past their time, record under
     the new conn id `["<untilMs>", conn, entry, conn, entry, ...]` (JSON; until the new
     entry's own expiry: past it, the replaced connections' own refreshes have settled
     things), and make sure that hash lives as long.

Flags (the #!lua line, Redis 7 script flags)
  none: it grows Redis (HSET), so it is refused whole, before it runs, while Redis is
  over maxmemory (docs/decisions.md, "maxmemory"); without the flags line its first
  write could be an HDEL, which Redis does not check, and the HSET after it went
  through.

KEYS
  1. conns hash `<prefix>{uid}:conns`: conn id → `<expiresAtMs>|<node>|<device>|<sinceMs>`
  2. replaced hash `<prefix>{uid}:replaced`: conn id of a new connection → what its add
     replaced (step 5)

ARGV
  1. conn id of the new connection
  2. its entry value, `<expiresAtMs>|<node>|<device>|<sinceMs>`
  3. its device
  4. now, ms since the Unix epoch
  5. the limit: most live connections per user, a positive integer
  6. the entry's lifetime, ms (for the hash's own expiry)

Returns
  {1, conn, entry, conn, entry, ...}: admitted; then each replaced connection and its
  entry value as it was (naming the node holding it; presence-withdraw-1 writes it
  back should the new connection's client turn out to have left). {0}: refused, the
  user is at the limit (nothing recorded).

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
  (a key of another type fails with Redis's own WRONGTYPE error, before anything is written)
]]

local connsKey, replacedKey = KEYS[1], KEYS[2]
local conn, value, device = ARGV[1], ARGV[2], ARGV[3]
local now, limit, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

if not now or not limit or limit < 1 or not ttl or ttl < 1 or conn == '' or device == '' then
  return redis.error_reply('INVALID_REQUEST now, limit and ttl must be positive numbers, conn and device non-empty')
end
local untilMs = string.match(value, '^(%d+)|[^|]+|[^|]+|%d+$')
if not untilMs then
  return redis.error_reply('INVALID_REQUEST entry must be <expiresAt>|<node>|<device>|<since>')
end

local entries = redis.call('HGETALL', connsKey)
local live = 0
local expired, replaced = {}, {}
for i = 1, #entries, 2 do
  local id, entry = entries[i], entries[i + 1]
  local expires, dev = string.match(entry, '^(%d+)|[^|]+|([^|]+)|')
  if not expires or tonumber(expires) <= now then
    expired[#expired + 1] = id
  elseif dev == device and id ~= conn then
    replaced[#replaced + 1] = id
    replaced[#replaced + 1] = entry
  elseif id ~= conn then
    live = live + 1
  end
end

if live >= limit then
  for _, id in ipairs(expired) do
    redis.call('HDEL', connsKey, id)
  end
  return {0}
end

local records = {}
if #replaced > 0 then
  records = redis.call('HGETALL', replacedKey)
end

for _, id in ipairs(expired) do
  redis.call('HDEL', connsKey, id)
end
local reply = {1}
local record = {untilMs}
for i = 1, #replaced, 2 do
  redis.call('HDEL', connsKey, replaced[i])
  reply[#reply + 1] = replaced[i]
  reply[#reply + 1] = replaced[i + 1]
  record[#record + 1] = replaced[i]
  record[#record + 1] = replaced[i + 1]
end
redis.call('HSET', connsKey, conn, value)
if redis.call('PTTL', connsKey) < ttl then
  redis.call('PEXPIRE', connsKey, ttl)
end
if #replaced > 0 then
  for i = 1, #records, 2 do
    local recordUntil = string.match(records[i + 1], '^%["(%d+)"')
    if not recordUntil or tonumber(recordUntil) <= now then
      redis.call('HDEL', replacedKey, records[i])
    end
  end
  redis.call('HSET', replacedKey, conn, cjson.encode(record))
  if redis.call('PTTL', replacedKey) < ttl then
    redis.call('PEXPIRE', replacedKey, ttl)
  end
end
return reply
