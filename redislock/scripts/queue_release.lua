-- queue_release.lua: free a lock if the caller still owns it, handing it
-- to the oldest live waiter (after queue.lua).
--
-- ARGV[1]  the owner that acquired it
-- ARGV[2]  "1" when the caller gives up waiting: whether or not it was
--          handed the lock meanwhile, it leaves the queue
--
-- Returns 1 when released, 0 when the lock is not (or no longer) the
-- caller's: the current holder's lock is left alone.
if redis.call('hget', KEYS[1], 'owner') ~= ARGV[1] then
  if ARGV[2] == '1' then
    redis.call('lrem', KEYS[3], 1, ARGV[1])
    redis.call('hdel', KEYS[4], ARGV[1])
  end
  return 0
end
free()
return 1
