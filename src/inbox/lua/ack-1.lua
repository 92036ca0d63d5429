--[[
ack-1: move one device's ack cursor forward; it never moves back (DESIGN.md §4, §5).

Steps
  1. Read the device's cursor (0 when it has none).
  2. If ARGV[2] is above it, store ARGV[2].
  3. Return the cursor after the call.

KEYS
  1. acks hash  `<prefix>{uid}:acks` (device -> highest acked seq)

ARGV
  1. device id, a non-empty string
  2. acked seq, a non-negative integer at most 2^53 - 1

Returns
  the device's cursor after the call: max(old cursor, ARGV[2]), an integer.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
]]

local acksKey = KEYS[1]
local device, seqArg = ARGV[1], ARGV[2]

if type(device) ~= 'string' or device == '' then
  return redis.error_reply('INVALID_REQUEST device must be a non-empty string')
end
if type(seqArg) ~= 'string' or not string.match(seqArg, '^%d+$') or #seqArg > 16
    or tonumber(seqArg) > 9007199254740991 then
  return redis.error_reply('INVALID_REQUEST seq must be a non-negative integer')
end

local seq = tonumber(seqArg)
local old = tonumber(redis.call('HGET', acksKey, device)) or 0
if seq > old then
  redis.call('HSET', acksKey, device, string.format('%d', seq))
  return seq
end
return old
