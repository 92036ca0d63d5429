--[[
ack-2: move one device's ack cursor forward, never back (DESIGN.md §5) — unless the
ack counts seqs of an inbox epoch that is gone.

Steps
  1. If ARGV[3] names an epoch and the inbox's epoch is another one (the inbox was
     lost and recreated since the ack was made), change nothing: the seq counts
     messages of the old inbox and would skip new ones on the next resume.
  2. Read the device's cursor (0 when it has none).
  3. If ARGV[2] is above it, store ARGV[2].
  4. Return the cursor after the call.

KEYS
  1. acks hash  `<prefix>{uid}:acks` (device -> highest acked seq)
  2. meta hash  `<prefix>{uid}:meta` (read only: its `epoch`)

ARGV
  1. device id, a non-empty string
  2. acked seq, a non-negative integer at most 2^53 - 1
  3. the epoch the seq belongs to, or "" to skip the check

Returns
  the device's cursor after the call: max(old cursor, ARGV[2]), an integer.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
]]

local acksKey, metaKey = KEYS[1], KEYS[2]
local device, seqArg, epoch = ARGV[1], ARGV[2], ARGV[3] or ''

if type(device) ~= 'string' or device == '' then
  return redis.error_reply('INVALID_REQUEST device must be a non-empty string')
end
if type(seqArg) ~= 'string' or not string.match(seqArg, '^%d+$') or #seqArg > 16
    or tonumber(seqArg) > 9007199254740991 then
  return redis.error_reply('INVALID_REQUEST seq must be a non-negative integer')
end

local old = tonumber(redis.call('HGET', acksKey, device)) or 0
if epoch ~= '' and redis.call('HGET', metaKey, 'epoch') ~= epoch then
  return old
end
local seq = tonumber(seqArg)
if seq > old then
  redis.call('HSET', acksKey, device, string.format('%d', seq))
  return seq
end
return old
