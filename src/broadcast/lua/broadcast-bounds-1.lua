#!lua flags=no-writes
--[[
broadcast-bounds-1: what the broadcast stream still holds, to answer a client that
reconnects with `last_bseq` (DESIGN.md §8): its first retained entry, the last ID it
ever generated, and the highest ID removed by trimming (Redis 7 keeps it in XINFO).

Steps
  1. XINFO STREAM on the stream (an error reply when the stream does not exist).
  2. Pick `first-entry`'s ID, `last-generated-id` and `max-deleted-entry-id` from its
     field/value list.

Flags (the #!lua line, Redis 7 script flags)
  no-writes: reads only, so it runs while Redis is over maxmemory (and on a replica);
  a write command here would fail.

KEYS
  1. the broadcast stream `<prefix>broadcast`

ARGV
  (none)

Returns
  {first, last, maxDeleted}: stream IDs as strings; "" for each when the stream does
  not exist; first is "" when the stream is empty; maxDeleted is "0-0" when nothing
  was ever removed.

Error replies
  (none of its own)
]]

local ok, info = pcall(redis.call, 'XINFO', 'STREAM', KEYS[1])
if not ok then
  return {'', '', ''}
end
local first, last, maxDeleted = '', '', '0-0'
for i = 1, #info, 2 do
  local name, value = info[i], info[i + 1]
  if name == 'first-entry' and type(value) == 'table' then
    first = value[1]
  elseif name == 'last-generated-id' then
    last = value
  elseif name == 'max-deleted-entry-id' then
    maxDeleted = value
  end
end
return {first, last, maxDeleted}
