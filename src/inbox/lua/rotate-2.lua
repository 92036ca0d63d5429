--[[
rotate-2: give a user's inbox a new epoch, when it still has the one given
(DESIGN.md §11). Used when Redis came back with less than a connection was already
sent (a restored snapshot, a failover to a replica that was behind, the last second
of an `appendfsync everysec` AOF lost with its machine): the seqs above the inbox's
latest will be assigned again, to other messages, so a cursor of the old epoch
(a device's `last_seq`, a stored ack cursor) no longer says what a device has. With a
new epoch every such device is told `reset`.

Steps
  1. If the inbox's epoch is not ARGV[1] (another node rotated it first, or the inbox
     is gone), change nothing.
  2. Else set the epoch to ARGV[2] and delete the stored ack cursors: they count seqs
     of the old epoch, and a device resuming from one would skip new messages.
  3. Return the epoch after the call.

KEYS
  1. meta hash  `<prefix>{uid}:meta` (its `epoch`)
  2. acks hash  `<prefix>{uid}:acks` (device -> highest acked seq)

ARGV
  1. the epoch to replace, a non-empty string
  2. the new epoch, a non-empty string other than ARGV[1]

Returns
  the inbox's epoch after the call, "" when it has none.

Error replies
  INVALID_REQUEST <reason>  an argument above is malformed (nothing is written)
]]

local metaKey, acksKey = KEYS[1], KEYS[2]
local expected, fresh = ARGV[1], ARGV[2]

if type(expected) ~= 'string' or expected == '' or type(fresh) ~= 'string' or fresh == '' or fresh == expected then
  return redis.error_reply('INVALID_REQUEST the epochs must be two different non-empty strings')
end

local current = redis.call('HGET', metaKey, 'epoch')
if current ~= expected then
  return current or ''
end
redis.call('HSET', metaKey, 'epoch', fresh)
redis.call('DEL', acksKey)
return fresh
