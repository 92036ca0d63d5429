#!lua
--[[
partition-claim-3: claim a block of store partitions for one store (one data dir), or
re-assert the block it holds (DESIGN.md §2, §9; docs/decisions.md "Several nodes").

A store's partitions are the MsgID partition bytes base..base+count-1 (0..255 in
all). Two stores holding one partition number would mint the same MsgIDs, so a
partition is held by at most one store, and a claim never takes one that is held.

Steps
  1. With a base (every start of a data dir that has one, and every heartbeat): if a
     partition of the block is held by another store, change nothing and answer the
     first such partition and its owner. Else write every partition of the block to
     this store (again: a FLUSHALL may have dropped them).
  2. Without a base (first start of a data dir): if the store already holds exactly
     one block of `count` (an earlier claim whose answer was lost), answer it. Else
     take the lowest block base = k * count (aligned, so blocks of different sizes
     never half-overlap) whose partitions are all free.
  3. Write the store's description (for the conflict messages of other stores), and
     answer whether it was there before: a store with a base that this Redis does not
     know is one whose Redis lost its data, or that now runs on another Redis or key
     prefix (its inboxes are not here).

Flags (the #!lua line, Redis 7 script flags)
  none: it writes (HSET), so it is refused whole, before it runs, while Redis is over
  maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. partitions hash `<prefix>xiu:{store}:partitions`: partition number → store id
  2. stores hash `<prefix>xiu:{store}:stores`: store id → description JSON

ARGV
  1. store id, non-empty
  2. count: partitions in the block, a power of two from 1 to 256
  3. base: first partition of the block (0 .. 256 - count), or '' to claim one
  4. description of the store (JSON text), written as its entry in the stores hash

Returns
  {1, base, known}                      the block base..base+count-1 is this store's;
                                        known: 1 when the stores hash had an entry for
                                        this store before this call, else 0
  {0, partition, owner, description}    `partition` is held by store `owner`
                                        (description: its stores-hash entry, or '')
  {-1}                                  no free block of `count` partitions is left

Error replies
  INVALID_REQUEST <reason>  an argument is malformed, or the store holds partitions
                            that are not one block of `count` (nothing is written)
]]

local partitionsKey, storesKey = KEYS[1], KEYS[2]
local store, count, baseArg, description = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local SPACE = 256

if store == '' or not count or count < 1 or count > SPACE or count % 1 ~= 0 then
  return redis.error_reply('INVALID_REQUEST store id must be non-empty and count 1..256')
end

-- Holds base..base+count-1 for this store, or answers the first one held by another.
local function hold(base)
  local fields, args = {}, {}
  for p = base, base + count - 1 do
    fields[#fields + 1] = tostring(p)
    args[#args + 1] = tostring(p)
    args[#args + 1] = store
  end
  local owners = redis.call('HMGET', partitionsKey, unpack(fields))
  for i = 1, count do
    local owner = owners[i]
    if owner and owner ~= store then
      return {0, base + i - 1, owner, redis.call('HGET', storesKey, owner) or ''}
    end
  end
  redis.call('HSET', partitionsKey, unpack(args))
  local known = redis.call('HSET', storesKey, store, description) == 0 and 1 or 0
  return {1, base, known}
end

if baseArg ~= '' then
  local base = tonumber(baseArg)
  if not base or base % 1 ~= 0 or base < 0 or base + count > SPACE then
    return redis.error_reply('INVALID_REQUEST base must be a whole number with base + count <= 256')
  end
  return hold(base)
end

local taken = {}
local mine, lowest = 0, nil
local flat = redis.call('HGETALL', partitionsKey)
for i = 1, #flat, 2 do
  local p = tonumber(flat[i])
  if p then
    taken[p] = true
    if flat[i + 1] == store then
      mine = mine + 1
      if not lowest or p < lowest then lowest = p end
    end
  end
end

if mine > 0 then
  local whole = mine == count and lowest + count <= SPACE
  if whole then
    for p = lowest, lowest + count - 1 do
      if redis.call('HGET', partitionsKey, tostring(p)) ~= store then whole = false end
    end
  end
  if not whole then
    return redis.error_reply('INVALID_REQUEST store ' .. store .. ' holds partitions that are not one block of ' .. count)
  end
  return hold(lowest)
end

for base = 0, SPACE - count, count do
  local free = true
  for p = base, base + count - 1 do
    if taken[p] then
      free = false
      break
    end
  end
  if free then return hold(base) end
end
return {-1}
