#!lua flags=allow-oom
--[[
delete-if-1: delete a key only while it still holds the value the caller wrote
(compare-and-delete; src/redis/delete-if.ts). A GET then a DEL from the client could
delete a value another writer put there between the two; here both run as one.

Used for:
  - a store's lease on shutdown (DESIGN.md §9; docs/decisions.md "Several nodes"): if
    another node wrote the lease meanwhile (a copy of the data dir running), that
    lease is left alone;
  - a `client_msg_id` claim left pending by a failed write
    (src/cluster/client-id-claims.ts): a claim another store took after this one's
    expired is left alone.

Flags (the #!lua line, Redis 7 script flags)
  allow-oom: it only deletes, which frees memory: a failed write's claim must go also
  while Redis is over maxmemory, or a retry of its client_msg_id is refused until the
  claim expires (docs/decisions.md, "maxmemory").

KEYS
  1. the key

ARGV
  1. the value the caller wrote (byte for byte)

Returns
  1 when the key held ARGV[1] and is deleted, 0 when it was absent or held another value.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
