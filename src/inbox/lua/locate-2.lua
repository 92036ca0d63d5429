#!lua flags=no-writes
--[[
locate-2: the seq at which a MsgID is still in one user's inbox, for
`GET /v1/messages/{id}` (DESIGN.md §4). Read-only.

Steps
  1. ZSCORE the MsgID in the ids set: its seq, or none (never appended, or trimmed:
     append-7 drops the ids below the stream's window).
  2. XRANGE that one seq (`<seq>-0`): the entry must still be in the stream and name
     the MsgID. An entry deleted by hand (XDEL) is gone from the stream but not from
     the ids set; history and delivery show it as a gap, and so does this answer.

Flags (the #!lua line, Redis 7 script flags)
  no-writes: reads only, so it runs while Redis is over maxmemory (and on a replica);
  a write command here would fail.

KEYS
  1. ids zset      `<prefix>{uid}:ids` (MsgID -> seq)
  2. inbox stream  `<prefix>{uid}:inbox`

ARGV
  1. MsgID, 16 lower-case hex digits

Returns
  the seq (an integer >= 1), or 0 when the MsgID is not in the inbox.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed
]]

local idsKey, inboxKey = KEYS[1], KEYS[2]
local msgId = ARGV[1]

if type(msgId) ~= 'string' or not string.match(msgId, '^[0-9a-f]+$') or #msgId ~= 16 then
  return redis.error_reply('INVALID_REQUEST msg id must be 16 hex digits')
end

local score = redis.call('ZSCORE', idsKey, msgId)
if not score then return 0 end
local seqText = string.format('%d', tonumber(score))
local entry = redis.call('XRANGE', inboxKey, seqText .. '-0', seqText .. '-0')[1]
if not entry then return 0 end
local fields = entry[2]
for i = 1, #fields, 2 do
  if fields[i] == 'id' then
    if fields[i + 1] == msgId then return tonumber(seqText) end
    return 0
  end
end
return 0
