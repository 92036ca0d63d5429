--[[
lease-release-1: drop a store's lease only if it is still this node's (DESIGN.md §9;
docs/decisions.md "Several nodes"). A node stopping drops its lease so readers learn
at once that its store cannot be read now; if another node wrote the lease meanwhile
(a copy of the data dir running: both suspend their writes while the other's lease is
found in place of theirs), that lease is left alone, so the node still running sees
itself alone only once its own lease is the one in place.

KEYS
  1. the lease `<prefix>xiu:{store}:lease:<store id>`

ARGV
  1. the lease value this node wrote (its JSON text, byte for byte)

Returns
  1 when the lease was this node's and is dropped, 0 when it was absent or another's.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
