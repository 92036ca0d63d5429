#!lua
--[[
rotate-7: give a user's inbox a new epoch, when it still has the one given
(DESIGN.md §11), record the inbox generation it is made under (ARGV[4]), and record
which epoch it replaced and the seq the new one continues from (the meta's `lineage`).
The stored ack cursors, which count seqs of the old epoch, leave the acks hash and are
kept in the meta hash with that epoch (`cursor <device>` = "<seq> <epoch>"), so a device
resuming from its stored cursor is told `reset` as one giving `last_seq` and `epoch`
is. rotate-6 deleted them: such a device resumed as a new one, from the first retained
seq, and the seqs between its cursor and that one, which it never had, went unsaid (a
black-box tester's finding F1, walk7; docs/decisions.md "Stored cursors across a new
epoch"). rotate-5 recorded a resume claim's lineage through the counter at rotation time, which
counts the seqs appended between the read that showed the claim and the rotation:
those, which no device had, were marked `redelivered` after the `reset` (the delivfix
model review, two nodes, seed 681); rotate-6 and later take the latest seq that read found
(ARGV[5]) as a bound. rotate-4 recorded no lineage: after a `reset`, the `trimmed` gap of the seqs below the
first retained one could not be told apart from a real miss, and clients were told to
show nothing for it, which hid seqs a device never had (a black-box tester's finding J:
docs/decisions.md "Redis with less than it had"). rotate-3 recorded no generation, so after a raise an epoch a resume claim rotated to was
rotated again by the first append (append-13.lua step 1): each device of the user was
reset and sent the inbox twice for one loss (redisops2 R1). Used when Redis came back with less than a connection was already
sent (a restored snapshot, a failover to a replica that was behind, the last second
of an `appendfsync everysec` AOF lost with its machine): the seqs above the inbox's
latest will be assigned again, to other messages, so a cursor of the old epoch
(a device's `last_seq`, a stored ack cursor) no longer says what a device has. With a
new epoch every such device is told `reset`.

A rotation asked for because a connecting device claimed a `last_seq` above the
latest (ARGV[3] > 0) is what a client's wrong `last_seq` looks like too, and each one
resets every device of the user: at most one such rotation per cool-down, across nodes,
so a client that repeats the claim in a loop cannot reset the others again and again
(docs/decisions.md "Redis with less than it had"). Rotations the node's own deliveries
proved (ARGV[3] = 0) are never refused and leave the cool-down as it is.

Steps
  1. If the inbox's epoch is not ARGV[1] (another node rotated it first, or the inbox
     is gone), change nothing.
  2. If ARGV[3] > 0: now = Redis's TIME in ms; if the meta field `resume_rotated`
     (when the last such rotation was made, ms) lies within ARGV[3] ms before now,
     change nothing (refused: the epoch stays ARGV[1]); else set it to now. A field in
     the future (Redis's clock stepped back) counts as lapsed.
  3. Set the epoch to ARGV[2]. Move each stored ack cursor to the meta hash as
     `cursor <device>` = "<seq> <ARGV[1]>" (replacing the device's kept one of an older
     epoch) and delete the acks hash: a cursor counts seqs of the old epoch, and a
     device resuming from it as if it were of the new one would skip new messages;
     with its epoch, it is reset (DESIGN.md §5). Cursors kept from older epochs (a
     device away through two rotations) stay, at most ARGV[6] - (cursors moved) of them,
     by field name; a device none is kept for resumes as a new one. With ARGV[4]
     above the meta's `gen` (absent: 0), record it as `gen`: the new epoch was made
     from what Redis has now, by a node that had read generation ARGV[4], so an append
     under it need not rotate again (append-13.lua step 1); never lowered.
     Record `lineage` as "<ARGV[2]> <ARGV[1]> <seq>", seq the meta's `seq` counter
     (the latest seq assigned; 0 when unset), or ARGV[5] when that is lower, for a
     resume claim's rotation (what Redis held when the claim was read: a seq appended
     since, between that read and this call, is news to every device), and 0 for
     one the node's deliveries proved (ARGV[3] = 0): that proof is of seqs Redis
     assigned again, to other messages, from a seq no one knows, so no seq of the old
     epoch is vouched for (the verifier's D5 × J interaction: a batch of 8 after a
     restore to 3 had 4..6 marked as the device's). Seqs 1..seq of the new epoch are
     those of the old one as Redis holds them now, the numbering goes on (delivery marks
     `redelivered` the part of a post-reset `trimmed` gap a device had under ARGV[1]:
     src/inbox/lineage.ts). Its first word names the epoch it is about, so a `lineage`
     left by an earlier rotation (an older node's script rotating after it) is not
     taken for this epoch's.
  4. Return the epoch after the call.

Flags (the #!lua line, Redis 7 script flags)
  none: it writes (HSET), so it is refused whole, before it runs, while Redis is over
  maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. meta hash  `<prefix>{uid}:meta` (its `epoch`, `seq`, `resume_rotated`, `gen`, `lineage`
     and `cursor <device>` fields)
  2. acks hash  `<prefix>{uid}:acks` (device -> highest acked seq)

ARGV
  1. the epoch to replace, a non-empty string
  2. the new epoch, a non-empty string other than ARGV[1]
  3. the cool-down of a rotation asked for by a resume claim, ms, an integer >= 0;
     0 for one the node's deliveries proved (no cool-down)
  4. the inbox generation the node holds (generation.ts), a non-negative integer of
     at most 15 digits; 0: record none
  5. for a resume claim's rotation, the latest seq of the read that showed the claim, a
     non-negative integer of at most 15 digits; "": none (the counter alone)
  6. most devices with a cursor per user (`PIXIU_MAX_DEVICE_CURSORS`), a positive
     integer: bounds the cursors kept of older epochs too

Returns
  the inbox's epoch after the call, "" when it has none; ARGV[1] itself when step 2
  refused the rotation.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
]]

local metaKey, acksKey = KEYS[1], KEYS[2]
local expected, fresh = ARGV[1], ARGV[2]
local coolDown = tonumber(ARGV[3])
local genArg = ARGV[4]
local readArg = ARGV[5] or ''
local mostArg = ARGV[6]

if type(expected) ~= 'string' or expected == '' or type(fresh) ~= 'string' or fresh == '' or fresh == expected then
  return redis.error_reply('INVALID_REQUEST the epochs must be two different non-empty strings')
end
if not coolDown or coolDown < 0 or coolDown ~= math.floor(coolDown) then
  return redis.error_reply('INVALID_REQUEST the cool-down must be an integer number of ms >= 0')
end
if type(genArg) ~= 'string' or not string.match(genArg, '^%d+$') or #genArg > 15 then
  return redis.error_reply('INVALID_REQUEST the generation must be a non-negative integer of at most 15 digits')
end
if readArg ~= '' and (not string.match(readArg, '^%d+$') or #readArg > 15) then
  return redis.error_reply('INVALID_REQUEST the latest seq read must be a non-negative integer of at most 15 digits, or empty')
end
if type(mostArg) ~= 'string' or not string.match(mostArg, '^[1-9]%d*$') or #mostArg > 9 then
  return redis.error_reply('INVALID_REQUEST the most devices must be a positive integer')
end

local current = redis.call('HGET', metaKey, 'epoch')
if current ~= expected then
  return current or ''
end
-- Step 3's cursors, read before the first write (a key of the wrong type fails here):
-- the old epoch's, and the fields of the meta hash (those kept from older epochs).
local acksHeld = redis.call('HGETALL', acksKey)
local metaFields = redis.call('HKEYS', metaKey)

--@include includes/keep-cursors.lua

if coolDown > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local last = tonumber(redis.call('HGET', metaKey, 'resume_rotated') or '')
  if last and last <= now and now - last < coolDown then
    return expected
  end
  redis.call('HSET', metaKey, 'resume_rotated', string.format('%.0f', now))
end
local top = redis.call('HGET', metaKey, 'seq')
if type(top) ~= 'string' or not string.match(top, '^%d+$') then top = '0' end
-- A claim's: seqs appended after the read that showed it are no device's.
if readArg ~= '' and tonumber(readArg) < tonumber(top) then top = readArg end
-- A loss the node proved (ARGV[3] = 0): seqs at or below the counter may already name
-- other messages, and no one knows from which seq on: none is vouched for.
if coolDown == 0 then top = '0' end
redis.call('HSET', metaKey, 'epoch', fresh, 'lineage', fresh .. ' ' .. expected .. ' ' .. top)
local gen = tonumber(genArg)
if gen > 0 and gen > (tonumber(redis.call('HGET', metaKey, 'gen') or '') or 0) then
  redis.call('HSET', metaKey, 'gen', genArg)
end
keepCursors(metaKey, acksKey, acksHeld, metaFields, expected, tonumber(mostArg))
return fresh
