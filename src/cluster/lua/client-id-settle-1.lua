#!lua
--[[
client-id-settle-1: record that a client_msg_id names a stored MsgID, unless another
store's claim took its place meanwhile (src/cluster/client-id-claims.ts). A store
claims the id (`P|<store>`, expiring) before it writes the message; a node stalled
past that expiry (a freeze, a disk stall) may find another store has claimed, stored
and settled it since: overwriting that claim would leave two messages under one id,
both appended. So the claim is set only while it is still what this store left.

Steps
  1. Read the claim. If it is missing (expired), this store's pending mark ARGV[1], or
     ARGV[2] (the claim this store found and is replacing: a message that is gone),
     set it to ARGV[3], expiring at ARGV[4] (ms since the Unix epoch).
  2. Return the claim after the call: ARGV[3] when set, else what is there (another
     store's pending mark or MsgID).

Flags (the #!lua line, Redis 7 script flags)
  none: it writes (SET), so it is refused whole, before it runs, while Redis is over
  maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. the claim  `<prefix>cmid:{<client_msg_id>}`

ARGV
  1. this store's pending mark, `P|<store id>`
  2. the claim value this store found and may replace, or "" for none
  3. the MsgID, 16 lower-case hex digits
  4. when the claim expires, ms since the Unix epoch, a positive integer

Returns
  the claim's value after the call.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
]]

local mine, found, id, at = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if type(mine) ~= 'string' or mine == '' or type(found) ~= 'string'
    or type(id) ~= 'string' or not string.match(id, '^[0-9a-f]+$') or #id ~= 16
    or type(at) ~= 'string' or not string.match(at, '^[1-9]%d*$') or #at > 15 then
  return redis.error_reply('INVALID_REQUEST pending mark, found value, id and expiry must be given')
end
local now = redis.call('GET', KEYS[1])
if now and now ~= mine and (found == '' or now ~= found) then
  return now
end
redis.call('SET', KEYS[1], id, 'PXAT', at)
return id
