#!lua flags=no-writes
--[[
stream-bounds-2: what a capped stream still holds — the broadcast stream, to answer a
client that reconnects with `last_bseq`, and a channel's history, to answer a `sub`
with `since` (DESIGN.md §8): its first retained entry, the last ID it ever generated,
and the highest ID removed by trimming (Redis 7 keeps it in XINFO; Pixiu's publish
scripts set it when they trim: broadcast-publish-2.lua, channel-publish-4.lua). Called
`broadcast-bounds-2` (src/broadcast/lua/) while only broadcasts read it; the same
script, moved to src/streams/lua/ when channels began to read it.

Only a stream that does not exist is answered as none. broadcast-bounds-1 caught every
error of XINFO STREAM (pcall), so a key of another type (an operator's SET, another
program under the prefix) read as a missing stream: every client reconnecting with a
`last_bseq` was sent `reset`, told its stream was lost (a reviewer's finding, F2). Now
such a key fails with Redis's WRONGTYPE, which Pixiu answers and logs as a key of the
wrong type (src/redis/wrong-type.ts), as it does for every other command on it.

Steps
  1. EXISTS on the stream: when it does not exist, return {"", "", ""}.
  2. XINFO STREAM on it (Redis's WRONGTYPE error reply when it is not a stream).
  3. Pick `first-entry`'s ID, `last-generated-id` and `max-deleted-entry-id` from its
     field/value list.

Flags (the #!lua line, Redis 7 script flags)
  no-writes: reads only, so it runs while Redis is over maxmemory (and on a replica);
  a write command here would fail.

KEYS
  1. the stream: `<prefix>broadcast`, or a channel's history `<prefix>ch:{<channel>}:history`

ARGV
  (none)

Returns
  {first, last, maxDeleted}: stream IDs as strings; "" for each when the stream does
  not exist; first is "" when the stream is empty; maxDeleted is "0-0" when nothing
  was ever removed.

Error replies
  none of its own; Redis's WRONGTYPE … when the key holds another type than a stream
]]

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'', '', ''}
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
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
