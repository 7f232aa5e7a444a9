-- reserve.lua: reserve more fencing tokens for the passes of the Driver
-- that holds a lock (after queue.lua).
--
-- ARGV[1]  the owner that Redis has as the holder
-- ARGV[2]  the last token the Driver has reserved
-- ARGV[3]  how many more to reserve
--
-- Returns the new last token, or 0 when the lock is not (or no longer)
-- that owner's, or its last reserved token is not ARGV[2] (then the new
-- ones would not follow on from the old).
local cur = redis.call('hmget', KEYS[1], 'owner', 'last')
if cur[1] ~= ARGV[1] or tonumber(cur[2]) ~= tonumber(ARGV[2]) then
  return 0
end
local last = redis.call('incrby', KEYS[2], tonumber(ARGV[3]))
if last - tonumber(ARGV[3]) ~= tonumber(ARGV[2]) then
  -- Something else took tokens: keep none of these.
  return 0
end
redis.call('hset', KEYS[1], 'last', last)
return last
