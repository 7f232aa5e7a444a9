-- renew.lua: extend the lease of a lock if the caller still owns it.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  the owner that acquired it
-- ARGV[2]  the new lease, in milliseconds from now
--
-- Returns 1 when renewed, 0 when the lock is not (or no longer) the
-- caller's.
if redis.call('hget', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
