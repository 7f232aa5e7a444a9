-- queue_release.lua: free a lock if the caller still owns it, handing it
-- to the oldest live waiter (with queue.lua).
--
-- ARGV[1]  the owner that acquired it
-- ARGV[2]  "1" when the caller gives up waiting: whether or not it was
--          handed the lock meanwhile, it leaves the queue
--
-- Returns 1 when released, 0 when the lock is not (or no longer) the
-- caller's: the current holder's lock is left alone.
--
-- A lock that nobody waits for is freed before queue.lua's functions are
-- defined (see queue_acquire.lua).
local owner = redis.call('hget', KEYS[1], 'owner')
if owner == ARGV[1] and redis.call('exists', KEYS[3]) == 0 then
  redis.call('del', KEYS[1])
  return 1
end
-- [queue.lua]
if owner ~= ARGV[1] then
  if ARGV[2] == '1' then
    redis.call('lrem', KEYS[3], 1, ARGV[1])
    redis.call('hdel', KEYS[4], ARGV[1])
  end
  return 0
end
free()
return 1
