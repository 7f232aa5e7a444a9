-- queue_release.lua: free a lock if the caller still owns it, handing it
-- to the oldest live waiter (after queue.lua).
--
-- ARGV[1]  the owner that acquired it
-- ARGV[2]  "1" when the caller gives up waiting: whether or not it was
--          handed the lock meanwhile, it leaves the queue
-- ARGV[3]  (optional) n: the next n arguments are owners to take out of
--          the queue first (waiters that the caller's Driver passed the
--          lock to, whose places are left)
-- ARGV[4+n...]  (optional) groups of four: owner, lease (ms), window (ms),
--          inbox: waiters of the caller's Driver that waited in that
--          process only; they join the queue at the back, the first group
--          first, before the lock is let go
--
-- Returns 1 when released, 0 when the lock is not (or no longer) the
-- caller's: the current holder's lock is left alone.
local n = tonumber(ARGV[3]) or 0
for i = 4, 3 + n do
  redis.call('lrem', KEYS[3], 1, ARGV[i])
  redis.call('hdel', KEYS[4], ARGV[i])
end
if #ARGV >= 7 + n then
  local now = now_ms()
  for i = 4 + n, #ARGV - 3, 4 do
    place(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], now)
  end
end
if redis.call('hget', KEYS[1], 'owner') ~= ARGV[1] then
  if ARGV[2] == '1' then
    redis.call('lrem', KEYS[3], 1, ARGV[1])
    redis.call('hdel', KEYS[4], ARGV[1])
  end
  return 0
end
free()
return 1
