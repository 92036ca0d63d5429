#!lua flags=allow-oom
--[[
ack-7: move one device's ack cursor forward, never back (DESIGN.md §5) — unless the
ack counts seqs of an inbox epoch that is gone — and keep at most ARGV[4] devices'
cursors per user. A rotation (rotate-7.lua, append-13.lua) keeps each cursor of the
epoch it replaces in the meta hash with that epoch (`cursor <device>` = "<seq> <epoch>"),
so the device, resuming from it, is told `reset`: the device's first cursor of the new
epoch deletes that one (ack-4 had no such field to delete; docs/decisions.md "Stored
cursors across a new epoch"), and an ack still counting seqs of the epoch a kept cursor
names moves that one forward instead (an ack in flight as the rotation came). ack-5
moved such a cursor forward but never made one: a device whose FIRST ack of the old
epoch was still held by its node (acks reach Redis in rounds, ack-cursors.ts) as another
node rotated had no cursor to keep, its ack was dropped, and, leaving before it acked
under the new epoch, it came back as a new device (no `reset`, the whole retained inbox
as news) although it had processed messages (a fresh review's finding, cursorreview
F3). ack-6 and later make the kept cursor then, as the rotation would have had the ack landed
first, when the inbox's `lineage` shows its epoch replaced the ack's (step 1b).
ack-6 answered an ack of an epoch that is not the inbox's with the device's cursor of
the current epoch (0 when it has none, as after a rotation moved the acks hash away):
`POST /v1/me/ack`, which checks the epoch it is given against one read just before, then
answered `cursor: 0` for a device whose cursor under that epoch was 73 when a rotation
came between the two (the chaos walk's F1); ack-7 answers -1 there, and the route a 409,
as for an epoch its own read finds replaced (docs/api.md "Client routes").
ack-2 kept a cursor for every device id ever used, without end: a client that makes a
new device id per session grew the hash by one field each time (a soak test's finding).
The cursors expire with the inbox (append-7.lua's retention); ack-3 wrote them to a
user with no inbox too, where they stayed for good.

Steps
  1. If the inbox has no epoch (never made, expired, or lost), change nothing: a
     cursor counts seqs of an epoch, and the append that makes the next one drops
     every cursor anyway; return -1 when ARGV[3] names an epoch, else the device's
     cursor. If ARGV[3] names an epoch and the inbox's epoch is another
     one (the inbox was lost and recreated, or rotated, since the ack was made), the
     seq counts messages of the old inbox and would skip new ones on the next resume:
     change nothing in the acks hash, return -1, and
     a. if the meta's `cursor <device>` names ARGV[3], set it to "<ARGV[2]> <ARGV[3]>"
        when ARGV[2] is above its seq (never back);
     b. else (it has none, or one of an older epoch) make it "<ARGV[2]> <ARGV[3]>" when
        all of these hold: the meta's `lineage` is "<the inbox's epoch> <ARGV[3]>
        <through>" (a rotation replaced ARGV[3] by the inbox's epoch: rotate-7.lua,
        append-13.lua), the device has no cursor of the current epoch (one it acked
        since, on another node, is newer), ARGV[2] is above 0, and, when it has no
        kept cursor, fewer than ARGV[4] are held (the cap on kept cursors,
        keep-cursors.lua: a late ack drops no other device's; none is made past it).
        This is the cursor the rotation would have kept had the ack landed before it.
        ARGV[2] is kept as acked, also above `through`: those were seqs of ARGV[3] the
        node sent (the delivery refuses an ack above what it sent), and `through`
        bounds only what a resume marks `redelivered`, which resume.ts hadAfterReset
        applies when it reads the cursor, as for the cursors a rotation keeps.
     An ack of any other epoch (no lineage: an inbox created afresh; one of another
     rotation; made up) changes nothing: only the node's word that the ack counts in
     the epoch the current one replaced makes state.
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
  inbox (a kept cursor step 1b makes: one small field per device, at most ARGV[4] kept
  per user); refused, the node holds the ack and writes it again every round, and a
  device resuming on another node is sent its acked messages again.

KEYS
  1. acks hash  `<prefix>{uid}:acks` (device -> highest acked seq)
  2. meta hash  `<prefix>{uid}:meta` (its `epoch`, `keep` and `lineage`, read; the
     device's `cursor <device>`, made, moved forward or deleted; the other `cursor `
     fields, counted by step 1b)

ARGV
  1. device id, a non-empty string
  2. acked seq, a non-negative integer at most 2^53 - 1
  3. the epoch the seq belongs to, or "" to skip the check
  4. most devices with a cursor per user, a positive integer (`PIXIU_MAX_DEVICE_CURSORS`):
     of the acks hash (step 4), and of the kept cursors step 1b may make

Returns
  the device's cursor after the call, an integer: max(old cursor, ARGV[2]); or -1 when
  ARGV[3] names an epoch that is not the inbox's (none included: step 1), whatever step 1
  did with a kept cursor; or the old cursor (0 when none) for an ack with no epoch to a
  user with no inbox.

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

local held = redis.call('HGET', acksKey, device)
local old = tonumber(held) or 0
local keptField = 'cursor ' .. device
local meta = redis.call('HMGET', metaKey, 'epoch', 'keep', keptField, 'lineage')
if not meta[1] then
  if epoch ~= '' then return -1 end
  return old
end
local most = tonumber(maxArg)
if epoch ~= '' and meta[1] ~= epoch then
  local seq = tonumber(seqArg)
  local keptSeq, keptEpoch = string.match(meta[3] or '', '^(%d+) (.+)$')
  if keptEpoch == epoch then
    -- 1a: moved forward, never back.
    if seq > tonumber(keptSeq) then
      redis.call('HSET', metaKey, keptField, string.format('%d', seq) .. ' ' .. epoch)
    end
    return -1
  end
  -- 1b: made (or replacing one of an older epoch) only for the epoch the current one replaced.
  local of, replaced = string.match(meta[4] or '', '^(%S+) (%S+) %d+$')
  if held or seq == 0 or of ~= meta[1] or replaced ~= epoch then
    return -1
  end
  if not meta[3] then
    local kept = 0
    for _, field in ipairs(redis.call('HKEYS', metaKey)) do
      if string.sub(field, 1, 7) == 'cursor ' then kept = kept + 1 end
    end
    if kept >= most then return -1 end
  end
  redis.call('HSET', metaKey, keptField, string.format('%d', seq) .. ' ' .. epoch)
  return -1
end
local seq = tonumber(seqArg)
if seq <= old then
  return old
end
local added = redis.call('HSET', acksKey, device, string.format('%d', seq))
if added == 1 then redis.call('HDEL', metaKey, keptField) end
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
