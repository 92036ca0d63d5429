#!lua
--[[
generation-raise-2: raise the inbox generation, so that every inbox gets a new epoch at
its next append (append-13.lua step 1; docs/decisions.md "Redis with less than it had",
"The inbox generation"). Run after Redis went back in time (an unplanned failover to a
replica that was behind, a restore of an older snapshot): the seqs above what Redis
kept of each inbox will be assigned again, and a device resuming under the old epoch
must be told `reset`.

The new generation is Redis's time in ms (TIME), or one more than the generation in
Redis, or ARGV[2], or one more than ARGV[1] when the stored one is below it, whichever is
highest: a generation read
from a time is above every one given before a restore that brought an older one back
(as long as the clocks of the Redis machines do not lag by more than the time since
that raise), so an inbox that recorded a generation Redis has since lost is still
passed; ARGV[1] and ARGV[2] cover a node that holds such a lost generation itself.

Steps
  1. current = the key's integer (absent: 0).
  2. If ARGV[1] is not "" and current is above it (another node raised it since the
     caller read it), return {current, 0}: one raise for one loss seen by several nodes.
     Below it, Redis went back past a raise the caller had read (the loss that lost
     this raise too: a failover or restore to before it): that is no reason not to
     raise, and the raise goes past ARGV[1] (review1 F1: answering {current, 0} there
     had the caller take the lower value and raise nothing).
  3. Set the key to max(current + 1, Redis's TIME in ms, ARGV[2], ARGV[1] + 1 when
     current is below ARGV[1]); return {it, 1}.

Flags (the #!lua line, Redis 7 script flags)
  none: it writes (SET), so it is refused whole, before it runs, while Redis is over
  maxmemory (docs/decisions.md, "maxmemory"), and on a read-only replica.

KEYS
  1. the inbox generation `<prefix>inbox-generation` (a string holding an integer)

ARGV
  1. the generation the caller last read, decimal, or "" to raise whatever it is
  2. the least generation to set, a non-negative integer (0: none)

Returns
  {generation after the call, 1 when this call raised it else 0}

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
]]
local expected, least = ARGV[1], ARGV[2]
if type(expected) ~= 'string' or (expected ~= '' and (not string.match(expected, '^%d+$') or #expected > 15)) then
  return redis.error_reply('INVALID_REQUEST the generation read must be "" or a non-negative integer of at most 15 digits')
end
if type(least) ~= 'string' or not string.match(least, '^%d+$') or #least > 15 then
  return redis.error_reply('INVALID_REQUEST the least generation must be a non-negative integer of at most 15 digits')
end

-- An unreadable value (set by hand: anything but a decimal of at most 15 digits, which
-- the nodes do not take either, generation.ts) counts as 0: the raise writes a readable one.
local stored = redis.call('GET', KEYS[1])
local current = 0
if type(stored) == 'string' and string.match(stored, '^%d+$') and #stored <= 15 then
  current = tonumber(stored)
end
local floor = tonumber(least)
if expected ~= '' then
  local held = tonumber(expected)
  if current > held then
    return {current, 0}
  end
  if current < held then floor = math.max(floor, held + 1) end
end
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local raised = math.max(current + 1, nowMs, floor)
redis.call('SET', KEYS[1], string.format('%.0f', raised))
return {raised, 1}
