-- release.lua: free a lock if the caller still owns it, on one RedLock
-- instance (whose waiters poll). A Driver hands the lock on instead:
-- queue_release.lua.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  the owner that acquired it
--
-- Returns 1 when released, 0 when the lock is not (or no longer) the
-- caller's: the current holder's lock is left alone.
if redis.call('hget', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
return 1
