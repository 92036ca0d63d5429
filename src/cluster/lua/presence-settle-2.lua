#!lua flags=allow-oom
--[[
presence-settle-2: settle the presence adds (presence-add-2) of new connections whose
reply did not reach their node (its command timeout passed while Redis stalled, or the
link was lost), whose handshakes were answered 503 (DESIGN.md §4 `conns`, §6).

Why: the node closes the connections an add replaced (4002) on the add's reply. An
add Redis ran but whose reply was lost had replaced the device's older connections
with an entry no connection will ever hold: those stayed open off presence, beside the
device's next connection, until their own refresh found their place taken (up to
PIXIU_HEARTBEAT), and the orphan entry stayed until it expired. The node sends this
once Redis answers (src/cluster/presence-settle.ts), and kicks what it returns
(docs/decisions.md, "A presence add whose reply is lost"). An add that never ran leaves
nothing to settle.

Why a newer connection is written back (new in -2): an add can reach Redis late — on
a slow link, or sent again by the node's Redis client once its cut link is back (a
command in flight is resent, even one whose caller already timed out) — after the
device's retry of the failed handshake was admitted, on another node. That late add
replaced the retry: the device's one live connection. -1 answered it, and the node
closed it 4002 within a second; the client, which had given up nothing, then met a
4002 it had no reason for. A connection the add replaced whose handshake came after
the failed one (its `since`, ARGV, is later) is that retry: it is written back, unless
the device has a live entry again (then it is closed 4002, as that entry's add would
have closed it). The times compared are the two nodes' own clocks (entries carry them
so): nodes whose clocks differ by more than the time from the failed handshake to the
retry (a command timeout at least) may get it wrong. The retry is then closed 4002 (as
by -1), or an older connection written back, which the device's retry replaces (4002,
as any). Why not make the add itself refuse to replace a newer entry: docs/decisions.md.

Steps
  1. Read the record of each add in KEYS[2] (presence-add-2 step 5), before anything
     is written. A KEYS[2] of another type than a hash holds none (an add fails before
     it writes while it is so): the orphans are deleted all the same, rather than the
     settling failing, and retried, until its adds would have expired.
  2. Delete each add's entry from conns (the orphan, if the add ran).
  3. For each record not past its time, each connection it names whose entry is not
     in conns now (one whose entry is there again is the device's connection once
     more: its own refresh wrote it back, finding no newer entry of the device in its
     place, and is kept):
     - if its entry has not expired and its `since` is later than the add's, it is a
       newer connection (step 4);
     - else it is returned, with its entry value as it was.
  4. The newer connections, newest first: each whose device has no live entry in
     conns is written back (and the device has one from then on); the others are
     returned. The hash is made to live at least ARGV[2] when one is written back.
  The record is left to expire (presence-add-2 prunes it): settling again, after a
  reply of this script was lost too, answers the same, or keeps what it wrote back.

Flags (the #!lua line, Redis 7 script flags)
  allow-oom: it frees memory (HDEL) and writes back at most what the settled adds
  removed, each in place of the add's own entry it deletes first, so it runs while
  Redis is over maxmemory too (docs/decisions.md, "maxmemory").

KEYS
  1. conns hash `<prefix>{uid}:conns`: conn id → `<expiresAtMs>|<node>|<device>|<sinceMs>`
  2. replaced hash `<prefix>{uid}:replaced`: conn id → `["<untilMs>", conn, entry, ...]` (presence-add-2)

ARGV
  1. now, ms since the Unix epoch (the clock presence-add-2's entries were timed by)
  2. an entry's lifetime, ms (for the hash's own expiry)
  3.. pairs: conn id of a connection whose add's reply did not reach the node, and its
     handshake's `since` (ms since the Unix epoch, as in its entry)

Returns
  {conn, entry, conn, entry, ...}: the connections those adds replaced, to close 4002,
  and their entry values as they were (naming the node holding each). Empty: nothing.

Error replies
  INVALID_REQUEST <reason>  an argument is malformed (nothing is written)
]]

local connsKey, replacedKey = KEYS[1], KEYS[2]
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
if not now or not ttl or ttl < 1 or #ARGV % 2 ~= 0 then
  return redis.error_reply('INVALID_REQUEST now and ttl must be positive numbers, the adds conn and since pairs')
end
local adds = {}
for i = 3, #ARGV - 1, 2 do
  local since = tonumber(ARGV[i + 1])
  if ARGV[i] == '' or not since then
    return redis.error_reply('INVALID_REQUEST each add must be a conn id and a since')
  end
  adds[#adds + 1] = {conn = ARGV[i], since = since}
end

-- Step 1. A KEYS[2] of another type holds no record (an add fails before it writes
-- when it is so, presence-add-2 step 3): read as none, so that the orphans still go.
for _, add in ipairs(adds) do
  local text = redis.pcall('HGET', replacedKey, add.conn)
  if type(text) == 'string' then
    local ok, record = pcall(cjson.decode, text)
    if ok and type(record) == 'table' and tonumber(record[1]) and tonumber(record[1]) > now then
      add.record = record
    end
  end
end

-- Step 2.
for _, add in ipairs(adds) do
  redis.call('HDEL', connsKey, add.conn)
end

-- Step 3.
local out, newer, seen = {}, {}, {}
for _, add in ipairs(adds) do
  local record = add.record or {}
  for j = 2, #record - 1, 2 do
    local id, entry = record[j], record[j + 1]
    if not seen[id] and redis.call('HEXISTS', connsKey, id) == 0 then
      seen[id] = true
      local expires, dev, since = string.match(entry, '^(%d+)|[^|]+|([^|]+)|(%d+)$')
      if expires and tonumber(expires) > now and tonumber(since) > add.since then
        newer[#newer + 1] = {id = id, entry = entry, dev = dev, since = tonumber(since)}
      else
        out[#out + 1] = id
        out[#out + 1] = entry
      end
    end
  end
end

-- Step 4.
if #newer > 0 then
  table.sort(newer, function(a, b) return a.since > b.since end)
  local live = {}
  local entries = redis.call('HGETALL', connsKey)
  for i = 1, #entries, 2 do
    local expires, dev = string.match(entries[i + 1], '^(%d+)|[^|]+|([^|]+)|')
    if expires and tonumber(expires) > now then
      live[dev] = true
    end
  end
  local wrote = false
  for _, c in ipairs(newer) do
    if live[c.dev] then
      out[#out + 1] = c.id
      out[#out + 1] = c.entry
    else
      redis.call('HSET', connsKey, c.id, c.entry)
      live[c.dev] = true
      wrote = true
    end
  end
  if wrote and redis.call('PTTL', connsKey) < ttl then
    redis.call('PEXPIRE', connsKey, ttl)
  end
end
return out
