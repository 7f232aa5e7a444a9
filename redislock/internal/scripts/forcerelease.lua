-- forcerelease.lua: free a lock whoever holds it (admin tools), handing it
-- to the oldest live waiter (after queue.lua). The key is deleted first,
-- also when a waiter gets the lock at once, so that a server that publishes
-- keyspace events publishes a "del" for it: the holder's Driver, if it
-- watches its keys, learns of the loss from it. Otherwise the holder finds
-- out at its next renewal.
--
-- Returns 1 when a lock was freed, 0 when nobody held it.
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
free()
return 1
