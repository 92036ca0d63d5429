--[[
channel-publish-2: record a channel publication in the channel's short history and
publish it to the nodes subscribed to the channel, in one step so the history order
is the delivery order (DESIGN.md §8). The history expires ARGV[4] ms after the last
publication (channel-publish-1 kept it for good: a channel used once, say one per
document or call, left its stream in Redis forever).

Steps
  1. XADD the publication to the history stream, trimmed to exactly ARGV[1] entries.
  2. PEXPIRE the history stream ARGV[4] ms from now.
  3. PUBLISH `<id>|<payload>` on the channel's topic, ARGV[2].

KEYS
  1. history stream `<prefix>ch:{<channel>}:history`

ARGV
  1. history cap, a positive integer
  2. the Pub/Sub topic of the channel
  3. payload: the publication's fields as JSON text, `{"type":…,"ts":…,"data":…}`
  4. history ttl, ms, a positive integer

Returns
  the publication's id (the stream entry ID).

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local cap = ARGV[1]
local ttl = ARGV[4]
if not string.match(cap or '', '^[1-9]%d*$') or (ARGV[2] or '') == '' or (ARGV[3] or '') == ''
    or not string.match(ttl or '', '^[1-9]%d*$') or #ttl > 15 then
  return redis.error_reply('INVALID_REQUEST cap, topic, payload and ttl are required')
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', cap, '*', 'p', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PUBLISH', ARGV[2], id .. '|' .. ARGV[3])
return id
