-- renew_many.lua: extend the leases of several locks, each if its owner
-- still holds it: renew.lua for many keys in one call (one Cluster slot).
--
-- KEYS     the lock hashes
-- ARGV[1]  the new lease, in milliseconds from now, of every one
-- ARGV[2...] the owner that acquired each key, in the order of KEYS
--
-- Returns, for each key, 1 when renewed and 0 when the lock is not (or no
-- longer) that owner's.
local out = {}
local lease = ARGV[1]
for i, key in ipairs(KEYS) do
  if redis.call('hget', key, 'owner') == ARGV[i + 1] then
    redis.call('pexpire', key, lease)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
