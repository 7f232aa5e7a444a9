-- forcerelease.lua: free a lock whoever holds it (admin tools), handing it
-- to the oldest live waiter (after queue.lua). The holder finds out at its
-- next renewal.
--
-- Returns 1 when a lock was freed, 0 when nobody held it.
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
free()
return 1
