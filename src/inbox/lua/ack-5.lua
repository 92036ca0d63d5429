#!lua flags=allow-oom
--[[
ack-5: move one device's ack cursor forward, never back (DESIGN.md §5) — unless the
ack counts seqs of an inbox epoch that is gone — and keep at most ARGV[4] devices'
cursors per user. A rotation (rotate-7.lua, append-11.lua) keeps each cursor of the
epoch it replaces in the meta hash with that epoch (`cursor <device>` = "<seq> <epoch>"),
so the device, resuming from it, is told `reset`: the device's first cursor of the new
epoch deletes that one (ack-4 had no such field to delete; docs/decisions.md "Stored
cursors across a new epoch"), and an ack still counting seqs of the epoch a kept cursor
names moves that one forward instead (an ack in flight as the rotation came). ack-2
kept a cursor for every device id ever used, without end: a client that makes a new
device id per session grew the hash by one field each time (a soak test's finding).
The cursors expire with the inbox (append-7.lua's retention); ack-3 wrote them to a
user with no inbox too, where they stayed for good.

Steps
  1. If the inbox has no epoch (never made, expired, or lost), change nothing: a
     cursor counts seqs of an epoch, and the append that makes the next one drops
     every cursor anyway. If ARGV[3] names an epoch and the inbox's epoch is another
     one (the inbox was lost and recreated, or rotated, since the ack was made), the
     seq counts messages of the old inbox and would skip new ones on the next resume:
     change nothing in the acks hash; if the meta's `cursor <device>` names ARGV[3]
     and a lower seq, set it to "<ARGV[2]> <ARGV[3]>". Never creates one: the epoch of
     an ack is the client's word.
  2. Read the device's cursor (0 when it has none).
  3. If ARGV[2] is above it, store ARGV[2].
  4. If it added a field (the device's first cursor of this epoch), delete the meta's
     `cursor <device>`, kept by a rotation from an older epoch.
     If that made the hash, give it the inbox's expiry (the meta hash's `keep`, set by
     append-7.lua; none for an inbox no append-7 has touched yet).
     If it added a field and the hash now holds more than ARGV[4] devices, drop the
     cursors of the devices furthest behind (lowest cursor; by device id on a tie),
     never this device's, until ARGV[4] are left. A device whose cursor was dropped
     resumes as a new device would when it gives no last_seq (docs/protocol.md).
  5. Return the cursor after the call.

Flags (the #!lua line, Redis 7 script flags)
  allow-oom: runs while Redis is over maxmemory (docs/decisions.md, "maxmemory"). A
  cursor is one small field per device, at most ARGV[4] per user, expiring with the
  inbox; refused, the node holds the ack and writes it again every round, and a device
  resuming on another node is sent its acked messages again.

KEYS
  1. acks hash  `<prefix>{uid}:acks` (device -> highest acked seq)
  2. meta hash  `<prefix>{uid}:meta` (its `epoch` and `keep`, read; the device's
     `cursor <device>`, moved forward or deleted)

ARGV
  1. device id, a non-empty string
  2. acked seq, a non-negative integer at most 2^53 - 1
  3. the epoch the seq belongs to, or "" to skip the check
  4. most devices with a cursor per user, a positive integer

Returns
  the device's cursor after the call, an integer: max(old cursor, ARGV[2]), or the old
  cursor (0 when none) when step 1 changed nothing.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
]]

local acksKey, metaKey = KEYS[1], KEYS[2]
local device, seqArg, epoch, maxArg = ARGV[1], ARGV[2], ARGV[3] or '', ARGV[4]

if type(device) ~= 'string' or device == '' then
  return redis.error_reply('INVALID_REQUEST device must be a non-empty string')
end
if type(seqArg) ~= 'string' or not string.match(seqArg, '^%d+$') or #seqArg > 16
    or tonumber(seqArg) > 9007199254740991 then
  return redis.error_reply('INVALID_REQUEST seq must be a non-negative integer')
end
if type(maxArg) ~= 'string' or not string.match(maxArg, '^[1-9]%d*$') or #maxArg > 9 then
  return redis.error_reply('INVALID_REQUEST the most devices must be a positive integer')
end

local old = tonumber(redis.call('HGET', acksKey, device)) or 0
local meta = redis.call('HMGET', metaKey, 'epoch', 'keep')
if not meta[1] then
  return old
end
local keptField = 'cursor ' .. device
if epoch ~= '' and meta[1] ~= epoch then
  local kept = redis.call('HGET', metaKey, keptField)
  local keptSeq, keptEpoch = string.match(kept or '', '^(%d+) (.+)$')
  if keptEpoch == epoch and tonumber(seqArg) > tonumber(keptSeq) then
    redis.call('HSET', metaKey, keptField, string.format('%d', tonumber(seqArg)) .. ' ' .. epoch)
  end
  return old
end
local seq = tonumber(seqArg)
if seq <= old then
  return old
end
local added = redis.call('HSET', acksKey, device, string.format('%d', seq))
if added == 1 then redis.call('HDEL', metaKey, keptField) end
local most = tonumber(maxArg)
local devices = added == 1 and redis.call('HLEN', acksKey) or 0
if devices == 1 and meta[2] then
  redis.call('PEXPIREAT', acksKey, meta[2])
end
if devices > most then
  local all = redis.call('HGETALL', acksKey)
  local others = {}
  for i = 1, #all, 2 do
    if all[i] ~= device then others[#others + 1] = { all[i], tonumber(all[i + 1]) or 0 } end
  end
  table.sort(others, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[1] < b[1]
  end)
  for i = 1, #others + 1 - most do
    redis.call('HDEL', acksKey, others[i][1])
  end
end
return seq
