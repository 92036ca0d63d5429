#!lua flags=allow-oom
--[[
presence-settle-1: settle the presence adds (presence-add-2) of new connections whose
reply did not reach their node (its command timeout passed while Redis stalled, or the
link was lost), whose handshakes were answered 503 (DESIGN.md §4 `conns`, §6).

Why: the node closes the connections an add replaced (4002) on the add's reply. An
add Redis ran but whose reply was lost had replaced the device's older connections
with an entry no connection will ever hold: those stayed open off presence, beside the
device's next connection, until their own refresh found their place taken (up to
PIXIU_HEARTBEAT), and the orphan entry stayed until it expired. The node sends this
once Redis answers (src/cluster/presence-settle.ts), and kicks what it returns (docs/decisions.md,
"A presence add whose reply is lost"). An add that never ran leaves nothing to settle.

Steps, for each conn id in ARGV[2..]
  1. Delete its entry from conns (the orphan, if the add ran).
  2. Read its record in KEYS[2] (presence-add-2 step 4), if any and not past its time:
     each connection it names whose entry is not in conns now is returned, with its
     entry value as it was. One whose entry is there again is the device's connection
     once more (its own refresh wrote it back, finding no newer entry of the device in
     its place: the orphan was dropped as stale by its node, or expired), and is kept.
  The record is left to expire (presence-add-2 prunes it): settling again, after a
  reply of this script was lost too, answers the same.

Flags (the #!lua line, Redis 7 script flags)
  allow-oom: it only deletes (HDEL), which frees memory, so it runs while Redis is
  over maxmemory too (docs/decisions.md, "maxmemory").

KEYS
  1. conns hash `<prefix>{uid}:conns`: conn id → `<expiresAtMs>|<node>|<device>|<sinceMs>`
  2. replaced hash `<prefix>{uid}:replaced`: conn id → `["<untilMs>", conn, entry, ...]` (presence-add-2)

ARGV
  1. now, ms since the Unix epoch (the clock presence-add-2's entries were timed by)
  2.. conn ids of connections whose add's reply did not reach the node

Returns
  {conn, entry, conn, entry, ...}: the connections those adds replaced, to close 4002,
  and their entry values as they were (naming the node holding each). Empty: nothing.

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is deleted)
]]

local connsKey, replacedKey = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
if not now then
  return redis.error_reply('INVALID_REQUEST now must be a number')
end

local out = {}
for i = 2, #ARGV do
  local conn = ARGV[i]
  redis.call('HDEL', connsKey, conn)
  local text = redis.call('HGET', replacedKey, conn)
  if text then
    local ok, record = pcall(cjson.decode, text)
    if ok and type(record) == 'table' and tonumber(record[1]) and tonumber(record[1]) > now then
      for j = 2, #record - 1, 2 do
        if redis.call('HEXISTS', connsKey, record[j]) == 0 then
          out[#out + 1] = record[j]
          out[#out + 1] = record[j + 1]
        end
      end
    end
  end
end
return out
