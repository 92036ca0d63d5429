#!lua flags=no-writes
--[[
range-3: read one page of a user's inbox with its bounds and its newest entry, as one
consistent snapshot (DESIGN.md §4, §5). Read-only.

Steps
  1. Read the meta hash (epoch, seq counter).
  2. XRANGE `(<after>-0 + COUNT limit`: the entries after ARGV[1], oldest first.
  3. Read the first and last entry IDs of the stream.
  4. latest = max(counter, seq of the last entry); first = seq of the first entry, or
     latest + 1 when the stream holds nothing.
  5. Return the last entry too (read in step 3 already: nothing more is read). A seq
     and the MsgID it names under the epoch: the delivery's epoch guard learns it, and
     an append that later lands on that seq as another message proves Redis lost writes
     (src/delivery/epoch-guard.ts; docs/decisions.md "Redis with less than it had").
     range-2 returned no step 5.

Flags (the #!lua line, Redis 7 script flags)
  no-writes: reads only, so it runs while Redis is over maxmemory (and on a replica);
  a write command here would fail.

KEYS
  1. inbox stream  `<prefix>{uid}:inbox`
  2. meta hash     `<prefix>{uid}:meta`

ARGV
  1. after seq, a non-negative integer (0: from the start)
  2. limit, most entries returned, a positive integer

Returns
  {epoch, first, latest, entries, last}: epoch is "" when the inbox has none (never
  created, or lost); first and latest are integers (no inbox at all: first 1, latest 0);
  entries is the XRANGE reply: {{"<seq>-0", {field, value, ...}}, ...}; last is the
  stream's last entry in that shape, {"<seq>-0", {field, value, ...}} (also in entries
  when the page reaches it), or nil when the stream is empty. It is returned as Redis
  holds it: the reader checks it is one the append script writes.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed
]]

local inboxKey, metaKey = KEYS[1], KEYS[2]
local after, limit = ARGV[1], ARGV[2]

if type(after) ~= 'string' or not string.match(after, '^%d+$') or #after > 16 then
  return redis.error_reply('INVALID_REQUEST after seq must be a non-negative integer')
end
if type(limit) ~= 'string' or not string.match(limit, '^[1-9]%d*$') or #limit > 9 then
  return redis.error_reply('INVALID_REQUEST limit must be a positive integer')
end

local meta = redis.call('HMGET', metaKey, 'epoch', 'seq')
local entries = redis.call('XRANGE', inboxKey, '(' .. after .. '-0', '+', 'COUNT', limit)
local first = redis.call('XRANGE', inboxKey, '-', '+', 'COUNT', 1)[1]
local last = redis.call('XREVRANGE', inboxKey, '+', '-', 'COUNT', 1)[1]

local latest = tonumber(meta[2]) or 0
if last then
  local lastSeq = tonumber(string.match(last[1], '^(%d+)-'))
  if lastSeq > latest then latest = lastSeq end
end
local firstSeq = latest + 1
if first then firstSeq = tonumber(string.match(first[1], '^(%d+)-')) end

-- false: a nil reply in the array's last place (a nil would end the Lua table before it).
return {meta[1] or '', firstSeq, latest, entries, last or false}
