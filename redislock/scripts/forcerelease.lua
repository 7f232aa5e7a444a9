-- forcerelease.lua: free a lock whoever holds it (admin tools), and tell
-- waiters. The holder finds out at its next renewal.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  the lock's pub/sub channel
--
-- Returns 1 when a lock was deleted, 0 when nobody held it.
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call('publish', ARGV[1], 'released')
return 1
