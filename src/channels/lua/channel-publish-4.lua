#!lua
--[[
channel-publish-4: record a channel publication in the channel's short history and
publish it to the nodes subscribed to the channel, in one step so the history order
is the delivery order (DESIGN.md §8). The history expires ARGV[4] ms after the last
publication (channel-publish-1 kept it for good: a channel used once, say one per
document or call, left its stream in Redis forever). A publication sent with a
`client_msg_id` is published once per channel and key: a marker set in the same step
names its id, and a retry that finds it publishes nothing (channel-publish-2 had no
marker: a producer's retry after a 503 whose publish had run, its reply lost to a
command timeout, published it again). It trims the history itself and records the
highest ID it trimmed, as broadcast-publish-2.lua does: Redis 7.0 leaves a stream's
`max-deleted-entry-id` at 0-0 when `XADD … MAXLEN` trims, so channel-publish-3 left no
trace of what it trimmed, and a `sub` whose `since` was trimmed past got what was left
with no `gap` (a black-box evaluator's finding; src/streams/lua/stream-bounds-2.lua
reads it back with each catch-up page).

Steps
  1. With a marker asked for (ARGV[5] not ""): if the marker KEYS[2] exists, return
     what it holds and publish nothing.
  2. XADD the publication to the history stream. If the stream now holds more than
     ARGV[1] entries: read the `len - cap` oldest (the ones the trim removes; one in
     the steady state), XTRIM to exactly the cap, and set max-deleted-entry-id to the
     newest of them (XSETID … MAXDELETEDID, Redis ≥ 7.0).
  3. PEXPIRE the history stream ARGV[4] ms from now.
  4. PUBLISH `<id>|<payload>` on the channel's topic, ARGV[2].
  5. With a marker asked for: SET KEYS[2] to `<id>|<ARGV[5]>`, expiring ARGV[4] ms
     from now (with the history of a channel published to no more).

Flags (the #!lua line, Redis 7 script flags)
  none: it grows Redis (XADD, SET), so it is refused whole, before it runs, while
  Redis is over maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. history stream `<prefix>ch:{<channel>}:history`
  2. the marker `<prefix>ch:{<channel>}:cmid:<client_msg_id>` (same hash tag: one
     Redis Cluster slot)

ARGV
  1. history cap, a positive integer
  2. the Pub/Sub topic of the channel
  3. payload: the publication's fields as JSON text, `{"type":…,"ts":…,"data":…}`
  4. history ttl, ms, a positive integer
  5. the publication's content fingerprint, kept in the marker (a retry with another
     is a conflict); "" for no marker (a publication without client_msg_id)

Returns
  {id, fingerprint, before}: before 0 when published now (id the new stream entry
  ID, fingerprint ARGV[5]); 1 when the marker was there (id and fingerprint as the
  first publish recorded them; nothing published).

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local cap = ARGV[1]
local ttl = ARGV[4]
local note = ARGV[5]
if not string.match(cap or '', '^[1-9]%d*$') or (ARGV[2] or '') == '' or (ARGV[3] or '') == ''
    or not string.match(ttl or '', '^[1-9]%d*$') or #ttl > 15 or type(note) ~= 'string' then
  return redis.error_reply('INVALID_REQUEST cap, topic, payload, ttl and fingerprint are required')
end
local once = note ~= ''
if once then
  local found = redis.call('GET', KEYS[2])
  if found then
    local bar = string.find(found, '|', 1, true)
    if bar then
      return {string.sub(found, 1, bar - 1), string.sub(found, bar + 1), 1}
    end
  end
end
local id = redis.call('XADD', KEYS[1], '*', 'p', ARGV[3])
local len = redis.call('XLEN', KEYS[1])
local keep = tonumber(cap)
if len > keep then
  local gone = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', len - keep)
  redis.call('XTRIM', KEYS[1], 'MAXLEN', keep)
  redis.call('XSETID', KEYS[1], id, 'MAXDELETEDID', gone[#gone][1])
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PUBLISH', ARGV[2], id .. '|' .. ARGV[3])
if once then
  redis.call('SET', KEYS[2], id .. '|' .. note, 'PX', ttl)
end
return {id, note, 0}
