-- waiters.lua: count the waiters whose place in the queue has not lapsed
-- (after queue.lua). Writes nothing.
--
-- ARGV  owners not to count: waiters that their Driver passed the lock
--       to, whose transfer may not have taken them off the queue yet
--
-- Returns the count.
local skip = {}
for _, o in ipairs(ARGV) do
  skip[o] = true
end
local now = now_ms()
local n = 0
for _, o in ipairs(redis.call('lrange', KEYS[3], 0, -1)) do
  local deadline = entry(redis.call('hget', KEYS[4], o))
  if not skip[o] and deadline and deadline >= now then
    n = n + 1
  end
end
return n
