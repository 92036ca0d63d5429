#!lua
--[[
room-add-5: add members to a room, all or none, within the room size cap (DESIGN.md §8).

A member's score is its join slot: the join time in ms × 1000 plus a counter, so every
member has its own slot (ms × 1000 stays below 2^53, exact in a double, until the year
2255). New members get slots after every slot the room has given, in the order named: listing
by score is join order even for members added in one call or in one millisecond, and
a slot is a cursor that neither skips nor repeats members when others leave. A room
message sent at ts ms goes to the members whose slot is below (ts + 1) × 1000.

"After every slot given", not only after the newest member's: the room's top key keeps
the highest slot given, and never goes down while it is kept. room-add-4 started after
the newest member, so when that member was removed, the next one added in the same
millisecond (or while slots ran ahead of the clock) took the removed member's slot; a
listing whose page cursor was that slot then never listed the newcomer (a review's
finding, L1). The top key expires a minute after Redis's clock passes it, as the cut
does: past then, the clock alone keeps new slots above it. A room without the key (one
written by an older release, or whose key expired) takes its newest member's slot.

A slot never runs ahead of the clock: a millisecond holds 1,000 slots, and an add that
would take slots of a later millisecond (more than 1,000 joins within one, from calls
running together) writes nothing and asks the caller to come back then (room-add-1
gave them anyway, and a room message sent in the next milliseconds skipped members
whose add had already been answered: a fresh review's finding).

Nor does a slot fall within a millisecond a room message was sent at (its `ts`, kept in
the room's cut key by room-time-1.lua): a member added after the message, in the same
millisecond, would be one of the recipients of its retries (room-add-2 gave it such a
slot; after a step back of Redis's clock, every member added until the clock caught up).

Steps
  1. Count the given users not yet members (a user named twice counts once); if none
     is new, reply {0, size} — also when the room is over a cap lowered since.
  2. If the room would then hold more than ARGV[1] members, refuse: nothing is written.
  3. The new members' slots start at the largest of now × 1000, top + 1 (top: the
     larger of the top key and the newest member's slot) and (the cut + 1) × 1000. If
     the last of them would be past now × 1000 + 999 and ARGV[3] is not "1", write
     nothing and reply {-1, ms}: try again at that ms, when they fit.
  4. Else give each new member the next slot; members already in keep theirs. The top
     key becomes the last slot given, expiring a minute after now reaches its ms.

Flags (the #!lua line, Redis 7 script flags)
  none: it grows Redis (ZADD, SET), so it is refused whole, before it runs, while
  Redis is over maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. members sorted set `<prefix>room:{<room>}:members` (user id → join slot)
  2. cut string `<prefix>room:{<room>}:cut`: the latest room message's ts, ms (room-time-1.lua)
  3. top string `<prefix>room:{<room>}:top`: the highest join slot given (this script)

ARGV
  1. cap: most members a room may have, a positive integer
  2. now: the join time, ms since the Unix epoch
  3. "1" to take slots ahead of the clock anyway (the newest slot is far ahead: another
     node's clock), else "0"
  4.. the user ids to add (at least one)

Returns
  {added, size}: how many were new, and the room's size after; or {-1, ms}: nothing
  written, try again at that ms.

Error replies
  INVALID_REQUEST room would have <n> members, over the cap of <cap>; use a channel …  (nothing written)
  INVALID_REQUEST cap, now and at least one user are required  (nothing written)
]]

local key = KEYS[1]
local cap, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local ahead = ARGV[3] == '1'
if not cap or cap < 1 or not now or now < 0 or #ARGV < 4 then
  return redis.error_reply('INVALID_REQUEST cap, now and at least one user are required')
end
local size = redis.call('ZCARD', key)
local fresh = {}
local seen = {}
for i = 4, #ARGV do
  local user = ARGV[i]
  if not seen[user] and not redis.call('ZSCORE', key, user) then
    fresh[#fresh + 1] = user
  end
  seen[user] = true
end
-- Naming only members already in adds nobody: never over the cap, also when the cap was
-- lowered below the room's size since (a producer's retry of an add that went through).
if #fresh == 0 then
  return {0, size}
end
if size + #fresh > cap then
  return redis.error_reply(string.format(
    'INVALID_REQUEST room would have %d members, over the cap of %d; use a channel for bigger audiences',
    size + #fresh, cap))
end
local slot = math.floor(now) * 1000
local top = tonumber(redis.call('GET', KEYS[3]) or '')
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] and (not top or tonumber(newest[2]) > top) then
  top = tonumber(newest[2])
end
if top and top + 1 > slot then
  slot = top + 1
end
local cut = tonumber(redis.call('GET', KEYS[2]) or '')
if cut and (cut + 1) * 1000 > slot then
  slot = (cut + 1) * 1000
end
local last = slot + #fresh - 1
if not ahead and last > math.floor(now) * 1000 + 999 then
  return {-1, math.floor(last / 1000)}
end
for i, user in ipairs(fresh) do
  -- '%.0f': a plain integer; tostring() would round a 16-digit number to 14 digits.
  redis.call('ZADD', key, 'NX', string.format('%.0f', slot + i - 1), user)
end
-- last > every slot given before, so the top only goes up. Kept until a minute after
-- Redis's clock passes it (at least a minute, for a slot behind now).
local aheadMs = math.floor(last / 1000) - math.floor(now)
if aheadMs < 0 then aheadMs = 0 end
redis.call('SET', KEYS[3], string.format('%.0f', last), 'PX', string.format('%.0f', aheadMs + 60000))
return {#fresh, size + #fresh}
