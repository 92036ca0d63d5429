#!lua
--[[
room-time-1: the `ts` of a room message sent now, and the room's cut (DESIGN.md §8).

A room message goes to the members whose join slot is below (ts + 1) × 1000
(room-add-5.lua), also when it is retried. Its ts is Redis's clock, or the millisecond
of the room's newest slot when that is later: a slot can be ahead of the clock (taken
while Redis's clock read later: a failover to a replica whose clock is behind, an NTP
step back; and every slot given after it), and on the clock alone members whose add had
been answered were left out until the clock caught up with their slot. The ts is also
kept as the room's cut, which room-add-5.lua gives no slot at or below, so that a
member added after this call is never one of the message's recipients, retries
included.

Steps
  1. now = Redis's TIME in ms; ts = max(now, the newest member's slot div 1000).
  2. If the cut is below ts, set it to ts, expiring a minute after Redis's clock reaches
     it (past then, the clock keeps new slots above ts by itself).

Flags (the #!lua line, Redis 7 script flags)
  none: it may write (SET), so it is refused whole, before it runs, while Redis is
  over maxmemory (docs/decisions.md, "maxmemory") (a room message is refused then
  anyway, as its appends are).

KEYS
  1. members sorted set `<prefix>room:{<room>}:members`
  2. cut string `<prefix>room:{<room>}:cut`

Returns
  ts, ms since the Unix epoch (an integer)
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ts = now
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if newest[2] then
  local ms = math.floor(tonumber(newest[2]) / 1000)
  if ms > ts then ts = ms end
end
local cut = tonumber(redis.call('GET', KEYS[2]) or '')
if not cut or cut < ts then
  redis.call('SET', KEYS[2], string.format('%.0f', ts), 'PX', ts - now + 60000)
end
return ts
