--[[
room-add-1: add members to a room, all or none, within the room size cap (DESIGN.md §8).

Steps
  1. Count the given users not yet members.
  2. If the room would then hold more than ARGV[1] members, refuse: nothing is written.
  3. Else add each new member with its join time (members already in keep theirs:
     ZADD NX), so a member added later never receives earlier room messages.

KEYS
  1. members sorted set `<prefix>room:{<room>}:members` (user id → join time, ms)

ARGV
  1. cap: most members a room may have, a positive integer
  2. now: the join time, ms since the Unix epoch
  3.. the user ids to add (at least one)

Returns
  {added, size}: how many were new, and the room's size after.

Error replies
  INVALID_REQUEST room would have <n> members, over the cap of <cap>  (nothing written)
]]

local key = KEYS[1]
local cap, now = tonumber(ARGV[1]), ARGV[2]
if not cap or cap < 1 or not tonumber(now) or #ARGV < 3 then
  return redis.error_reply('INVALID_REQUEST cap, now and at least one user are required')
end
local size = redis.call('ZCARD', key)
local fresh = {}
local seen = {}
for i = 3, #ARGV do
  local user = ARGV[i]
  if not seen[user] and not redis.call('ZSCORE', key, user) then
    fresh[#fresh + 1] = user
  end
  seen[user] = true
end
if size + #fresh > cap then
  return redis.error_reply(string.format('INVALID_REQUEST room would have %d members, over the cap of %d; use a channel for bigger audiences', size + #fresh, cap))
end
for _, user in ipairs(fresh) do
  redis.call('ZADD', key, 'NX', now, user)
end
return {#fresh, size + #fresh}
