--[[
broadcast-publish-1: appends one broadcast to the capped broadcast stream and records
the highest ID the trim removed, so that a client reconnecting with `last_bseq` can
be told a `gap` exactly (DESIGN.md §8, broadcast-bounds-1.lua).

Why not `XADD … MAXLEN`: Redis 7.0 updates the stream's `max-deleted-entry-id` on
XDEL only, not when MAXLEN/XTRIM trims (checked on 7.0.15: after trimming it stays
0-0), so a trim left no trace of what it removed. This script trims itself and sets
that field with `XSETID … MAXDELETEDID` (Redis ≥ 7.0).

Steps
  1. XADD with an auto-generated ID and the given fields.
  2. If the stream now holds more than the cap: read the `len - cap` oldest entries
     (the ones the trim removes; one in the steady state), XTRIM to exactly the cap,
     and set max-deleted-entry-id to the newest of them.

KEYS
  1. the broadcast stream `<prefix>broadcast`

ARGV
  1. cap: entries retained (an integer ≥ 1)
  2… field, value, field, value … of the entry

Returns
  the new entry's ID (the broadcast's bseq), a string

Error replies
  (none of its own; Redis's own when ARGV is malformed)
]]

local key = KEYS[1]
local cap = tonumber(ARGV[1])
local id = redis.call('XADD', key, '*', unpack(ARGV, 2))
local len = redis.call('XLEN', key)
if len > cap then
  local k = len - cap
  local gone = redis.call('XRANGE', key, '-', '+', 'COUNT', k)
  redis.call('XTRIM', key, 'MAXLEN', cap)
  redis.call('XSETID', key, id, 'MAXDELETEDID', gone[#gone][1])
end
return id
