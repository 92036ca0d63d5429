#!lua
--[[
minted-raise-1: record the last counters a store minted, per partition, never lowering
one (DESIGN.md §2: a MsgID is minted once; docs/decisions.md "Several nodes"). Two
copies of a data dir that both ran each write theirs; the higher stays, so the copy
behind learns how far the store went.

Flags (the #!lua line, Redis 7 script flags)
  none: it writes (HSET), so it is refused whole, before it runs, while Redis is over
  maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. the store's minted hash `<prefix>xiu:{store}:minted:<store id>`:
     partition byte (decimal) → last counter minted

ARGV
  pairs: partition byte, counter (decimal integers)

Returns
  the number of fields raised
]]
local raised = 0
for i = 1, #ARGV - 1, 2 do
  local field, value = ARGV[i], tonumber(ARGV[i + 1])
  local current = tonumber(redis.call('HGET', KEYS[1], field))
  if value and (not current or value > current) then
    redis.call('HSET', KEYS[1], field, ARGV[i + 1])
    raised = raised + 1
  end
end
return raised
