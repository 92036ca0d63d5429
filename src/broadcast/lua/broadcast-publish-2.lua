#!lua
--[[
broadcast-publish-2: appends one broadcast to the capped broadcast stream and records
the highest ID the trim removed, so that a client reconnecting with `last_bseq` can
be told a `gap` exactly (DESIGN.md §8, src/streams/lua/stream-bounds-2.lua). A broadcast sent with
a `client_msg_id` is appended once per MsgID: a marker set in the same step as the
XADD names its bseq, and a retry that finds it appends nothing (docs/decisions.md,
"Broadcast"). broadcast-publish-1 had no marker: a producer's retry after a 503 whose
XADD had run (its reply lost to a command timeout) appended the broadcast again.

Why not `XADD … MAXLEN`: Redis 7.0 updates the stream's `max-deleted-entry-id` on
XDEL only, not when MAXLEN/XTRIM trims (checked on 7.0.15: after trimming it stays
0-0), so a trim left no trace of what it removed. This script trims itself and sets
that field with `XSETID … MAXDELETEDID` (Redis ≥ 7.0).

Steps
  1. With a marker asked for (ARGV[2] not "0"): if the marker KEYS[2] exists, return
     what it holds and append nothing.
  2. XADD with an auto-generated ID and the given fields.
  3. If the stream now holds more than the cap: read the `len - cap` oldest entries
     (the ones the trim removes; one in the steady state), XTRIM to exactly the cap,
     and set max-deleted-entry-id to the newest of them.
  4. With a marker asked for: SET KEYS[2] to `<new id>|<ARGV[3]>`, expiring at ARGV[2].

Flags (the #!lua line, Redis 7 script flags)
  none: it grows Redis (XADD, SET), so it is refused whole, before it runs, while
  Redis is over maxmemory (docs/decisions.md, "maxmemory").

KEYS
  1. the broadcast stream `<prefix>broadcast`
  2. the broadcast's marker `<prefix>bcast:{<prefix>broadcast}:<MsgID>`: its hash tag
     is the stream's key name, so both keys are in one Redis Cluster slot (src/redis/keys.ts)

ARGV
  1. cap: entries retained (an integer ≥ 1)
  2. when the marker expires, ms since the Unix epoch on Redis's clock (the stored
     broadcast's expiry, moved onto Redis's clock by broadcast-stream.ts);
     "0": no marker (a broadcast without client_msg_id: no retry can name it)
  3. the note kept in the marker beside the bseq: the broadcast's tag filter as
     canonical JSON, "" for none (a retry with other tags is a conflict)
  4… field, value, field, value … of the entry

Returns
  {bseq, note, before}: before 0 when the entry was appended now (bseq its new ID,
  note ARGV[3]); 1 when the marker was there (bseq and note as the first append
  recorded them; nothing appended).

Error replies
  INVALID_REQUEST <reason>  the cap or the expiry is malformed (nothing is written)
]]

local key, marker = KEYS[1], KEYS[2]
local cap, at, note = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if not cap or cap < 1 or type(at) ~= 'string' or not string.match(at, '^%d+$') or #at > 15
    or type(note) ~= 'string' then
  return redis.error_reply('INVALID_REQUEST cap, marker expiry and note must be given')
end
local once = at ~= '0'
if once then
  local found = redis.call('GET', marker)
  if found then
    local bar = string.find(found, '|', 1, true)
    if bar then
      return {string.sub(found, 1, bar - 1), string.sub(found, bar + 1), 1}
    end
  end
end
local id = redis.call('XADD', key, '*', unpack(ARGV, 4))
local len = redis.call('XLEN', key)
if len > cap then
  local k = len - cap
  local gone = redis.call('XRANGE', key, '-', '+', 'COUNT', k)
  redis.call('XTRIM', key, 'MAXLEN', cap)
  redis.call('XSETID', key, id, 'MAXDELETEDID', gone[#gone][1])
end
if once then
  redis.call('SET', marker, id .. '|' .. note, 'PXAT', at)
end
return {id, note, 0}
