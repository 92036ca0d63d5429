#!lua
--[[
append-13: append one MsgID to one user's inbox, exactly once, with the instant its
content expires (ARGV[12], the entry's `exp`), name the nodes holding the user's live
connections (DESIGN.md §4, §9), keep the user's inbox keys only as long as something in
them can still be delivered, and give the inbox a new epoch first when the inbox
generation (ARGV[9]) is above the one it was last appended under. Given the MsgID of an
earlier append of the same batch to the user (ARGV[10]), append only if that one is in
the inbox.

append-12 kept the keys' expiry out of the past by ARGV[5], the node's estimate of
Redis's clock (its own clock plus the offset its registry measured at the last 5 s
renewal). That estimate moves with the node's clock until the next renewal: a node whose
clock was set back a day (an NTP step, a VM resumed) gave `keep` a day in Redis's past,
PEXPIREAT deleted the user's keys at once, the producer was answered 201, and the next
append handed out seq 1 again (a black-box tester's finding F1, walk31). append-13
judges it on Redis's own clock: step 6 reads `TIME` (only when it moves `keep`, about
once a day per user), so the keys always outlive the append by at least the grace.

append-11 wrote no expiry in the entry: a reader learnt that an entry's message had
expired only from the store that holds it, so once that store's node was removed for
good (stopped after its messages' ttl, as the README allowed) the entry read as
UNAVAILABLE for ever, and every user holding one stalled (no `welcome`, history 503)
until its partitions were retired (a black-box tester's finding F6, walk21). append-12
writes `exp`, the record's own `expiresAt`: a reader takes an entry whose `exp` has
passed for an `expired` gap without asking the store (src/delivery/entry-records.ts). The
field is written only when the caller gives it; an entry without it (written by
append-11 or earlier, during an upgrade too) is read from the store, as before. Older
releases' readers skip fields they do not know (codec.ts `toEntry`), so the entries
append-12 writes read the same there.

append-10 deleted the ack cursors when a generation rotated the epoch (step 5): a
device away meanwhile resumed from no cursor, as a new device, from the first retained
seq, and the seqs between its cursor and that one went unsaid (a black-box tester's
finding F1, walk7). append-11 keeps them in the meta hash with the epoch they count in,
as rotate-7.lua does, so such a device is told `reset` (docs/decisions.md "Stored
cursors across a new epoch").

append-9 recorded nothing of the epoch a generation rotation replaced (step 5's
`lineage`, which rotate-5.lua writes too): after the `reset` it causes, delivery could
not tell the seqs a device had under the old epoch from ones it never had (a black-box
tester's finding J). append-9, append-10 and append-11 write the same entries: during
an upgrade an older node's rotation leaves an earlier `lineage`, whose first word names another epoch,
and readers take it for none.

The earlier-append precondition (a review's F2): Redis refuses one command with a state
reply (BUSY while another client's script runs long, OOM, READONLY, LOADING,
MASTERDOWN) and runs the next one of the same connection a moment later, so an earlier
item of a batch was answered 503 while a later item to the same user, already sent,
was appended and answered 201; the producer's retry of the earlier one then landed
after it (out of the batch's order, docs/api.md "Messages"). An older node's
append-8 shares an inbox with it during an upgrade: it writes the same entries and
leaves `gen` as it is.

All or nothing: every read that can fail comes before the first write, and the next
seq is always one the stream takes, so once the script writes, nothing after fails.
Redis keeps a script's writes made before a command that raises: append-7 dropped the
ack cursors first and then ran XADD, which refused a seq at or below the stream's
last-generated ID (the meta hash lost while the stream remained, and the top entry
deleted by hand, XDEL): every append to the user failed for good, and the cursors were
gone with no new epoch.

Steps
  1. Read (nothing is written yet): the meta hash (epoch, seq counter, keep, gen),
     whether the MsgID is in the ids set, and the presence hash, whose nodes that have
     not expired are listed once each (step 7). If there is no epoch, the inbox is new or
     Redis lost it: ARGV[4] is the epoch to create. If there is one and ARGV[9] is above
     the meta's `gen` (absent: 0), Redis may have gone back in time since this inbox
     last took an append (an operator ran `pixiu redis lost-writes`, or a node saw Redis
     lose acknowledged writes: src/inbox/generation.ts), so its seqs above what Redis
     kept may be assigned again: ARGV[4] replaces the epoch, as rotate-7.lua replaces
     one (the ack cursors kept with the old epoch, step 5), and the seqs go on from
     what Redis kept.
     A device resuming under the old epoch is then sent `reset` (the epochs differ). An
     ARGV[9] at or below `gen` (a node that has not read a newer generation yet)
     changes nothing: never a rotation back. `resume_rotated` (rotate-7.lua's cool-down)
     is neither read nor set: this rotation is never refused.
  2. If the MsgID is already in the ids set, return its seq with dup = 1 and the nodes;
     the stream is not touched (a retried append is harmless), nor is the retention,
     unless step 1 found no epoch or a generation to rotate for: then the epoch is
     recorded as in step 5 and step 6 runs.
  2a. If ARGV[10] names an earlier append (a MsgID) and it is not in the ids set, refuse
     with EARLIER_MISSING, writing nothing: that append was refused (or is not there for
     another reason), and this one must not go ahead of its retry. The caller names it
     only while it has no answer for it (src/inbox/append-chain.ts): an append answered
     as done is not asked about, so one trimmed away by the cap since (another
     request's appends to the user) refuses nothing. One trimmed away between the two
     appends, both in flight (as many appends to the user from elsewhere as the cap, in
     that moment), is refused, a 503 whose retry appends it (docs/decisions.md
     "Inbox (Pi)").
  3. next seq = 1 + max(counter, seq of the stream's last entry). Reading the stream too
     means a seq is never reused even when the counter (or the whole meta hash) was
     lost while the stream remained.
  4. XADD with the explicit ID `<seq>-0` (the first write) and the fields `id` (ARGV[1]),
     `kind` (ARGV[2]), `room` (ARGV[6], when given) and `exp` (ARGV[12], when given),
     trimming to EXACTLY ARGV[3] entries
     (`MAXLEN cap`, not DESIGN.md's `MAXLEN ~ cap`): the first retained seq is then always
     latest - cap + 1, which callers and tests can rely on. The cost is one listpack
     edit per append once the cap is reached.
     XADD refuses an ID at or below the stream's last-generated ID, which is above its
     last entry only after the top entries were deleted by hand (XDEL) with the counter
     lost too: then that ID is read (XINFO STREAM, off the common path) and the XADD
     tried once more above it, so the seq is still never reused and the append does
     not fail for good.
  5. When step 1 found no epoch: record it with `created` (ARGV[5]) and drop the ack
     cursors, which counted seqs of the lost inbox (a kept cursor above the new seqs
     would make every reconnect without last_seq look like a reset); when it found a
     generation to rotate for: record the new epoch, move each stored cursor to the
     meta hash as `cursor <device>` = "<seq> <old epoch>" and delete the acks hash, as
     rotate-7.lua step 3 does (cursors kept from older epochs stay, at most ARGV[11] -
     (cursors moved) of them; both read in step 1, before anything is written;
     `created` stays), and record `lineage` as "<new epoch> <old epoch> <seq>", seq
     the latest seq assigned before this append (step 3's; the counter for a
     duplicate): seqs up to it are the old epoch's as Redis holds them, the numbering
     goes on (as rotate-7.lua records it; src/inbox/lineage.ts). A created epoch
     records none: its seqs restart, nothing of a lost inbox continues. Either way, with ARGV[9] above 0, record it as `gen`. ZADD the MsgID
     with its seq, drop ids at or below seq - cap (the window the stream keeps), and
     store the counter.
  6. Retention: if the message's content expires (ARGV[7]) at or after the inbox's
     `keep` (meta field; 0 when unset), set `keep` to ARGV[7] (or, if later, now: the
     later of ARGV[5] and Redis's `TIME`, which does the expiring) + ARGV[8] (the
     grace) and
     make the inbox, meta, ids and acks keys expire then (PEXPIREAT). So the keys
     outlive every message appended, and go ARGV[8] ms after the last one's content
     has: a user who comes back later finds no inbox, and the next append creates a
     new epoch (devices are told `reset`, docs/decisions.md "Inbox retention"). With
     messages of one TTL the keys are touched once per grace period, not per append.
  7. Return the nodes read in step 1 (presence entries that have not expired), so the
     caller can notify them without another round trip. Expired entries are left for
     presence to prune (this script stays cheap).

Flags (the #!lua line, Redis 7 script flags)
  none: it grows Redis (XADD, ZADD, HSET), so it is refused whole, before it runs,
  while Redis is over maxmemory (docs/decisions.md, "maxmemory"). Without the flags
  line Redis checked only its first write (append-7's was a DEL, which it does not
  check for memory) and let the rest through.

KEYS
  1. inbox stream  `<prefix>{uid}:inbox` (entries `<seq>-0`: `id`, `kind`, `room`, `exp`)
  2. meta hash     `<prefix>{uid}:meta` (`epoch`, `seq`, `keep`, `gen`, `created`, `lineage`)
  3. ids zset      `<prefix>{uid}:ids`
  4. conns hash    `<prefix>{uid}:conns` (presence; values `<expiresAtMs>|<node>|…`, read only)
  5. acks hash     `<prefix>{uid}:acks` (deleted when a new epoch is created or made by a
     rotation, its cursors then moved to the meta's `cursor <device>` fields)

ARGV
  1. MsgID, 16 lower-case hex digits
  2. kind, "1".."4" (user, room, broadcast, channel)
  3. cap, entries kept in the stream, a positive integer
  4. epoch to create when the inbox has none, a non-empty string (used only then)
  5. now, ms since the Unix epoch (the node's estimate of Redis's clock), stored as
     `created` with a new epoch; presence entries are judged live by it
  6. room id to store with the entry, or "" for none
  7. when the message's content expires, ms since the Unix epoch (its `expires_at`)
  8. grace, ms: how long the keys outlive the last content they point to
  9. the inbox generation the node last read (`<prefix>inbox-generation`, 0 when
     absent), a non-negative integer of at most 15 digits. Given as an argument, not
     read here: a per-user script touches only the user's slot (Redis Cluster).
  10. the MsgID that must be in the ids set first (step 2a), 16 lower-case hex digits;
     "" for none
  11. most devices with a cursor per user (`PIXIU_MAX_DEVICE_CURSORS`), a positive
     integer: bounds the cursors step 5 keeps of older epochs
  12. the entry's `exp`: when the message's record expires, ms since the Unix epoch,
     exactly its `expiresAt` (the instant the store expires it), a non-negative integer
     of at most 15 digits; "" (or absent, as append-11's callers send) for none: the
     entry is then written without it. Unlike ARGV[7] never an estimate: a reader
     takes the message for expired once `exp` has passed, without reading the record.

Returns
  {seq, epoch, dup, node...}: seq (integer >= 1), the inbox epoch after the call (a
  new one when step 1 rotated it), dup 1 when
  the MsgID was already present, else 0; then the distinct nodes holding a live
  connection of the user (for a duplicate too).

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
  EARLIER_MISSING <reason>  ARGV[10]'s MsgID is not in the inbox (step 2a; nothing is written)
  (a wrong-type key fails with Redis's own WRONGTYPE error, before anything is written)
]]

local inboxKey, metaKey, idsKey, connsKey, acksKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local msgId, kind, capArg, newEpoch, nowMs, room = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local expiresArg, graceArg, genArg, earlier = ARGV[7], ARGV[8], ARGV[9], ARGV[10] or ''
local mostArg, expArg = ARGV[11], ARGV[12] or ''

if type(msgId) ~= 'string' or not string.match(msgId, '^[0-9a-f]+$') or #msgId ~= 16 then
  return redis.error_reply('INVALID_REQUEST msg id must be 16 hex digits')
end
if kind ~= '1' and kind ~= '2' and kind ~= '3' and kind ~= '4' then
  return redis.error_reply('INVALID_REQUEST kind must be 1, 2, 3 or 4')
end
if type(capArg) ~= 'string' or not string.match(capArg, '^[1-9]%d*$') or #capArg > 15 then
  return redis.error_reply('INVALID_REQUEST cap must be a positive integer')
end
if type(newEpoch) ~= 'string' or newEpoch == '' or type(nowMs) ~= 'string' or type(room) ~= 'string' then
  return redis.error_reply('INVALID_REQUEST epoch, now and room must be given')
end
-- At most 15 digits each: their sum stays an exact integer in Lua's doubles.
if type(expiresArg) ~= 'string' or not string.match(expiresArg, '^%d+$') or #expiresArg > 15
    or type(graceArg) ~= 'string' or not string.match(graceArg, '^%d+$') or #graceArg > 15 then
  return redis.error_reply('INVALID_REQUEST expires at and grace must be non-negative integers (ms)')
end
if type(genArg) ~= 'string' or not string.match(genArg, '^%d+$') or #genArg > 15 then
  return redis.error_reply('INVALID_REQUEST the generation must be a non-negative integer of at most 15 digits')
end
if type(earlier) ~= 'string' or (earlier ~= '' and (not string.match(earlier, '^[0-9a-f]+$') or #earlier ~= 16)) then
  return redis.error_reply('INVALID_REQUEST the earlier msg id must be 16 hex digits or empty')
end
if type(mostArg) ~= 'string' or not string.match(mostArg, '^[1-9]%d*$') or #mostArg > 9 then
  return redis.error_reply('INVALID_REQUEST the most devices must be a positive integer')
end
if type(expArg) ~= 'string' or (expArg ~= '' and (not string.match(expArg, '^%d+$') or #expArg > 15)) then
  return redis.error_reply('INVALID_REQUEST the entry expiry must be a non-negative integer of at most 15 digits (ms) or empty')
end

local meta = redis.call('HMGET', metaKey, 'epoch', 'seq', 'keep', 'gen')
local epoch = meta[1]
local gen = tonumber(genArg)
-- created: no epoch (new inbox, or Redis lost it); rotated: one older than the generation.
local created, rotated = false, false
if not epoch then
  epoch = newEpoch
  created = true
elseif gen > (tonumber(meta[4]) or 0) then
  epoch = newEpoch
  rotated = true
end
-- Step 5's cursors, read before the first write (a key of the wrong type fails here):
-- the old epoch's, and the fields of the meta hash (those kept from older epochs).
local acksHeld, metaFields
if rotated then
  acksHeld = redis.call('HGETALL', acksKey)
  metaFields = redis.call('HKEYS', metaKey)
end

--@include includes/keep-cursors.lua

-- Steps 2 and 5: the epoch as step 1 decided it, with the cursors of the old one kept
-- with it (a rotation) or dropped (a created epoch: no epoch to name); `through`, the
-- latest seq before this append, as a rotation's lineage.
local function recordEpoch(fields, through)
  if created then
    fields[#fields + 1] = 'created'
    fields[#fields + 1] = nowMs
  end
  if created or rotated then
    fields[#fields + 1] = 'epoch'
    fields[#fields + 1] = epoch
    if gen > 0 then
      fields[#fields + 1] = 'gen'
      fields[#fields + 1] = genArg
    end
    if rotated then
      fields[#fields + 1] = 'lineage'
      fields[#fields + 1] = epoch .. ' ' .. meta[1] .. ' ' .. string.format('%d', through)
      keepCursors(metaKey, acksKey, acksHeld, metaFields, meta[1], tonumber(mostArg))
    else
      redis.call('DEL', acksKey)
    end
  end
  if #fields > 0 then redis.call('HSET', metaKey, unpack(fields)) end
end

-- The reply, {seq, epoch, dup, node...}: the nodes now (step 1), seq and dup once known.
local out = {0, epoch, 0}
do
  local now = tonumber(nowMs) or 0
  local seen = {}
  for _, value in ipairs(redis.call('HVALS', connsKey)) do
    local expires, node = string.match(value, '^(%d+)|([^|]+)|')
    if expires and tonumber(expires) > now and not seen[node] then
      seen[node] = true
      out[#out + 1] = node
    end
  end
end

-- Step 6: the keys live until ARGV[8] ms after the latest content expiry appended.
local function retain()
  local expires = tonumber(expiresArg)
  if expires < (tonumber(meta[3]) or 0) then return end
  -- Never in the past (content that expired already, a clock behind): PEXPIREAT would
  -- delete the inbox at once. Judged on Redis's clock (TIME), which does the expiring:
  -- ARGV[5] is the node's estimate of it, off by as much as the node's clock stepped
  -- since its last registry renewal. TIME is allowed here: Redis 7 replicates a
  -- script's effects, not the script.
  local t = redis.call('TIME')
  local now = math.max(tonumber(nowMs) or 0, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  if expires < now then expires = now end
  local keepText = string.format('%d', expires + tonumber(graceArg))
  redis.call('HSET', metaKey, 'keep', keepText)
  redis.call('PEXPIREAT', inboxKey, keepText)
  redis.call('PEXPIREAT', metaKey, keepText)
  redis.call('PEXPIREAT', idsKey, keepText)
  redis.call('PEXPIREAT', acksKey, keepText)
end

local dupSeq = redis.call('ZSCORE', idsKey, msgId)
if dupSeq then
  if created or rotated then
    recordEpoch({}, tonumber(meta[2]) or 0)
    retain()
  end
  out[1], out[3] = tonumber(dupSeq), 1
  return out
end

-- Step 2a: nothing is written yet.
if earlier ~= '' and not redis.call('ZSCORE', idsKey, earlier) then
  return redis.error_reply('EARLIER_MISSING an earlier message of the same batch to this user is not in the inbox')
end

-- Step 3: above the counter and the stream's last entry (one entry read, as append-7).
local top = tonumber(meta[2]) or 0
local last = redis.call('XREVRANGE', inboxKey, '+', '-', 'COUNT', 1)[1]
if last then
  local lastSeq = tonumber(string.match(last[1], '^(%d+)-'))
  if lastSeq > top then top = lastSeq end
end

-- Step 4, the first write: XADD the seq after `top` with the entry's fields (`room`
-- and `exp` when given); the reply, or the error as a table.
local fields = {'id', msgId, 'kind', kind}
if room ~= '' then
  fields[#fields + 1] = 'room'
  fields[#fields + 1] = room
end
if expArg ~= '' then
  fields[#fields + 1] = 'exp'
  fields[#fields + 1] = expArg
end
local function add(after)
  local text = string.format('%d', after + 1)
  return redis.pcall('XADD', inboxKey, 'MAXLEN', capArg, text .. '-0', unpack(fields)), text
end

-- %d, not tostring: Lua 5.1 prints large numbers with an exponent.
local added, seqText = add(top)
if type(added) == 'table' and added.err then
  -- Refused: the stream's last-generated ID is above its last entry (the top entries
  -- deleted by hand, XDEL) and the counter is not past it (the meta hash lost). Read
  -- that ID (XINFO STREAM; the stream exists, or XADD would have taken any seq) and
  -- try once more above it. Nothing is written yet, so a second refusal leaves no trace.
  local info = redis.call('XINFO', 'STREAM', inboxKey)
  for i = 1, #info - 1, 2 do
    if info[i] == 'last-generated-id' then
      local generated = tonumber(string.match(info[i + 1], '^(%d+)-'))
      if generated and generated > top then top = generated end
      break
    end
  end
  added, seqText = add(top)
  if type(added) == 'table' and added.err then return redis.error_reply(added.err) end
end
local seq = top + 1
redis.call('ZADD', idsKey, seqText, msgId)
local floor = seq - tonumber(capArg)
if floor > 0 then
  redis.call('ZREMRANGEBYSCORE', idsKey, '-inf', string.format('%d', floor))
end
recordEpoch({'seq', seqText}, top)
retain()
out[1] = seq
return out
