--[[
keepCursors: a piece of rotate-7.lua (step 3) and append-13.lua (step 5), which take it
in at the line `--@include includes/keep-cursors.lua` (src/redis/scripts.ts): when a
rotation replaces an epoch, keep each stored ack cursor, which counts seqs of that
epoch, in the meta hash with it, so a device resuming from it is told `reset`
(docs/decisions.md "Stored cursors across a new epoch").

  1. Each field of the acks hash whose value is a seq becomes the meta field
     `cursor <device>` = "<seq> <replaced>", replacing the device's kept one of an
     older epoch.
  2. Of the cursors kept of older epochs (the other `cursor ` fields), at most
     `most` - (cursors moved) stay: the first by field name; the rest are deleted
     (such a device resumes as a new one).
  3. The acks hash is deleted.

Arguments: the meta and acks keys; the acks hash's HGETALL and the meta hash's HKEYS,
read by the caller before its first write (a key of the wrong type fails there); the
epoch replaced; `most`, the most devices with a cursor per user (a positive integer).
Writes HDEL and HSET in slices of 1,000 values: unpack takes at most a few thousand
(Lua's C stack).
]]
local function keepCursors(metaKey, acksKey, acksHeld, metaFields, replaced, most)
  local moved, fields = {}, {}
  for i = 1, #acksHeld - 1, 2 do
    if string.match(acksHeld[i + 1], '^%d+$') then
      local field = 'cursor ' .. acksHeld[i]
      moved[field] = true
      fields[#fields + 1] = field
      fields[#fields + 1] = acksHeld[i + 1] .. ' ' .. replaced
    end
  end
  local older = {}
  for _, field in ipairs(metaFields) do
    if string.sub(field, 1, 7) == 'cursor ' and not moved[field] then older[#older + 1] = field end
  end
  local room = math.max(0, most - #fields / 2)
  if #older > room then
    table.sort(older)
    for i = room + 1, #older, 1000 do
      redis.call('HDEL', metaKey, unpack(older, i, math.min(i + 999, #older)))
    end
  end
  for i = 1, #fields, 1000 do
    redis.call('HSET', metaKey, unpack(fields, i, math.min(i + 999, #fields)))
  end
  redis.call('DEL', acksKey)
end
